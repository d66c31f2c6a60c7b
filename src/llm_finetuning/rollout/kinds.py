"""What GRPO's rollouts generate with, one object per kind: what each kind implies is an attribute, so nothing
compares kind names (the backend chooses the kind: ``Backend.choose_rollouts``; the plan holds it).

| kind | generates with | vLLM | TRL starts the engine here | TRL's loss on vLLM rollouts | engine's log-prob mode |
| --- | --- | --- | --- | --- | --- |
| ``generate`` | ``model.generate`` | no | - | - (no engine) | - |
| ``model_engine`` | the model's own engine (Unsloth's ``fast_inference``) | yes | no | no (Unsloth's loss) | Unsloth's |
| ``trl_colocate`` | TRL's colocated engine (hf backend) | yes | yes | yes | ours to set |
| ``trl_server`` | a ``trl vllm-serve`` server | yes | no (the user's) | yes | the server's |

    >>> ROLLOUTS["trl_colocate"].sets_logprob_mode, ROLLOUTS["generate"].uses_vllm
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import PipelineConfig

__all__ = ["ROLLOUTS", "RolloutKind"]


@dataclass(frozen=True)
class RolloutKind:
    """One way GRPO's completions are generated (module docstring)."""

    name: str
    engine: str  # what generates, in a sentence
    uses_vllm: bool  # a vLLM engine (any kind), not model.generate
    trl_engine: bool  # TRL starts a vLLM engine in this process (evaluation shares it)
    trl_server: bool  # a trl vllm-serve server (checked before the model loads)
    trl_loss: bool  # TRL's own GRPO loss trains on these vLLM rollouts (Unsloth's compiled trainer has its own)
    sets_logprob_mode: bool  # we choose what log-probs the engine reports (raw or processed)

    def trl_arguments(self, config: PipelineConfig) -> dict[str, Any]:
        """TRL's settings for the vLLM engine TRL talks to (its colocated one, or a server): none for
        ``model.generate`` or an engine the model brings (Unsloth's shares the model's weights)."""
        if not (self.trl_engine or self.trl_server):
            return {}
        return {  # a second full copy of the weights beside the training model: not Unsloth's shared-weight share
            "vllm_gpu_memory_utilization": config.grpo_training.engine_memory_share(holds_training_weights=False),
            "vllm_max_model_length": config.model.max_seq_length,
        }


ROLLOUTS = {kind.name: kind for kind in (
    RolloutKind("generate", "model.generate", uses_vllm=False, trl_engine=False, trl_server=False, trl_loss=False,
                sets_logprob_mode=False),
    RolloutKind("model_engine", "the model's own engine (Unsloth's)", uses_vllm=True, trl_engine=False,
                trl_server=False, trl_loss=False, sets_logprob_mode=False),
    RolloutKind("trl_colocate", "TRL's colocated engine", uses_vllm=True, trl_engine=True, trl_server=False,
                trl_loss=True, sets_logprob_mode=True),
    RolloutKind("trl_server", "the vLLM server", uses_vllm=True, trl_engine=False, trl_server=True, trl_loss=True,
                sets_logprob_mode=False),
)}  # fmt: skip
