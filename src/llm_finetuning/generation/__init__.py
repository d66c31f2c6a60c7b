"""Generation for evaluation, debugging and inference: one set of sampling settings, three engines.

settings.py      SamplingSettings (from_config), generation_budget, Completion
engines.py       the engine registry (hf, vllm, unsloth), choose_engine (the rule behind evaluation.engine), open_engine
hf.py            the hf engine: batched ``model.generate`` on the loaded model
vllm.py          the vllm engine (a vLLM engine of the run, fed the training weights) and the unsloth engine

An engine generates for a ``ModelManager``'s model; the vLLM engines it runs on belong to the run's
``vllm_engine.EngineOwner``:

    >>> engine, reason = open_engine("auto", manager, owner)                                 # doctest: +SKIP
    >>> engine.generate([conversation], SamplingSettings(greedy=True, max_new_tokens=32))     # doctest: +SKIP
    >>> generate_completions(model, tokenizer, [conversation], SamplingSettings(greedy=True))  # doctest: +SKIP
"""

from .engines import ENGINES, GenerationEngine, choose_engine, get_engine, open_engine
from .hf import generate_completions, generate_detailed, render_prompts
from .settings import Completion, Conversation, SamplingSettings, generation_budget

__all__ = [
    "ENGINES",
    "Completion",
    "Conversation",
    "GenerationEngine",
    "SamplingSettings",
    "choose_engine",
    "generate_completions",
    "generate_detailed",
    "generation_budget",
    "get_engine",
    "open_engine",
    "render_prompts",
]
