"""Who generates, in one package: GRPO's rollouts and what they imply for the loss, the engines evaluation and
the tools generate with, and every vLLM engine's life (start, weights, sleep, teardown).

What GRPO generates with
  kinds.py       one ``RolloutKind`` per way of generating (model.generate, Unsloth's engine, TRL's colocated
                 engine, a TRL server), with what each implies as attributes; the backend chooses, the plan holds
  importance.py  whether GRPO corrects for the engine's probabilities (TRL's importance-sampling correction), and
                 what log-probs the engine reports: one rule, every backend (its patches of TRL's loss sit
                 beside the loss: ``training/importance.py``)

What evaluation, debugging and the tools generate with (one set of sampling settings, three engines)
  settings.py    SamplingSettings (from_config), generation_budget, Completion
  engines.py     the engine registry (hf, vllm, unsloth), choose_engine (the rule behind evaluation.engine),
                 open_engine
  hf.py          the hf engine: batched ``model.generate`` on the loaded model
  vllm.py        the vllm engine (a vLLM engine of the run, fed the training weights) and the unsloth engine
  admission.py   how many of a call's requests an engine runs at once: what its KV cache holds to the end

Every vLLM engine's life
  owner.py       ``EngineOwner``: the one owner of the process's vLLM engine (ours, TRL's or Unsloth's)
  start.py       starting a ``vllm.LLM`` in this process, and shutting it down through its engine core
  weights.py     the training model's weights (LoRA folded in) into a running engine
  trl.py         TRL's colocated engine: started with the chosen log-prob mode, adopted by the owner
  unsloth.py     Unsloth's engine: its sleep mode asked for before import, its teardown
  server.py      GRPO on a ``trl vllm-serve`` server: asked at the start of the run, not hours later

| engine | started by | owned by | weights |
| --- | --- | --- | --- |
| ours | ``EngineOwner.ready``, on first use for generation | the run's ``EngineOwner`` | pushed before generating |
| TRL's colocated | TRL's ``GRPOTrainer`` (hf backend, ``use_vllm``) | the ``EngineOwner`` (adopted; one process) | TRL's sync (ours on vLLM's CPU build) |
| Unsloth's | ``FastLanguageModel`` with ``fast_inference`` | the ``EngineOwner`` (adopted at load) | shared with the model |
| TRL's server | the user (``trl vllm-serve``) | the server | TRL's client |

One rule for ownership: every engine in this process belongs to the run's (or the tool's) ``EngineOwner``,
which holds at most one and shuts it down at the end; an engine of ours lives for one evaluation outside GRPO.
Importing this package is cheap: vllm and trl are imported when an engine starts.

    >>> engine, reason = open_engine("auto", manager, owner)                                 # doctest: +SKIP
    >>> engine.generate([conversation], SamplingSettings(greedy=True, max_new_tokens=32))     # doctest: +SKIP
    >>> generate_completions(model, tokenizer, [conversation], SamplingSettings(greedy=True))  # doctest: +SKIP
"""

from .engines import ENGINES, GenerationEngine, choose_engine, get_engine, open_engine
from .hf import generate_completions, generate_detailed, render_prompts
from .importance import ImportanceSampling, importance_sampling
from .kinds import ROLLOUTS, RolloutKind
from .owner import EngineOwner, RunningEngine
from .settings import Completion, Conversation, SamplingSettings, generation_budget

__all__ = [
    "ENGINES",
    "ROLLOUTS",
    "Completion",
    "Conversation",
    "EngineOwner",
    "GenerationEngine",
    "ImportanceSampling",
    "RolloutKind",
    "RunningEngine",
    "SamplingSettings",
    "choose_engine",
    "generate_completions",
    "generate_detailed",
    "generation_budget",
    "get_engine",
    "importance_sampling",
    "open_engine",
    "render_prompts",
]
