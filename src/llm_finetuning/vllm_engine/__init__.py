"""The vLLM engines' life, in one home: who starts each engine, who owns it, how it sleeps and wakes, how it gets
the trained weights, and how it is torn down.

| engine | started by | owned by | weights | module |
| --- | --- | --- | --- | --- |
| ours | ``EngineOwner.ready``, on first use for generation | the run's ``EngineOwner`` | pushed before generating | ``owner.py``, ``start.py``, ``weights.py`` |
| TRL's colocated | TRL's ``GRPOTrainer`` (hf backend, ``use_vllm``) | the ``EngineOwner`` (adopted; one process) | TRL's sync (ours on vLLM's CPU build) | ``trl.py`` |
| Unsloth's | ``FastLanguageModel`` with ``fast_inference`` | the ``EngineOwner`` (adopted at load) | shared with the model | ``unsloth.py`` |
| TRL's server | the user (``trl vllm-serve``) | the server | TRL's client | ``server.py`` (checked before loading) |

One rule for ownership: every engine in this process belongs to the run's (or the tool's) ``EngineOwner``,
which holds at most one and shuts it down at the end; an engine of ours lives for one evaluation outside GRPO.
What an engine reports for GRPO's importance-sampling correction is decided with the rollouts
(``rollout/importance.py``).

Importing this package is cheap: vllm and trl are imported when an engine starts.
"""

from .owner import EngineOwner, RunningEngine

__all__ = ["EngineOwner", "RunningEngine"]
