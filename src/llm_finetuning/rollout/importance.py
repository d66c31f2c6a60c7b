"""Whether GRPO corrects for the vLLM engine's probabilities, and what the engine reports: one rule, every backend.

TRL's importance-sampling correction (``vllm_importance_sampling_correction``) weights each completion's loss
by the ratio of the trainer's probability of its tokens to the engine's, to undo the numerical gap between
two implementations of the same model. The trainer scores the full vocabulary at the sampling temperature.
vLLM reports either *processed* log-probs (after temperature, ``min_p``, ``top_k`` and ``top_p``: over the
tokens the filters keep, renormalised) or *raw* ones (the full vocabulary before temperature). With a sampling
filter on, processed log-probs are larger than the trainer's by the log of the mass the filter dropped, token
after token; TRL's default sequence-level weight is the exponential of the summed gap, so every completion
of realistic length is weighted by about zero and GRPO silently stops learning (a gap of 0.46 nats per token
was measured with ``min_p: 0.1``).

The rule: the correction is on only where the engine reports the trainer's own distribution.

| rollouts | sampling filters | engine reports | correction |
| --- | --- | --- | --- |
| ``model.generate`` | any | - | nothing to correct |
| any vLLM engine | none | processed log-probs (temperature applied) | on |
| TRL's colocated engine | min_p / top_k / top_p at temperature 1 | raw log-probs (we set the engine's mode) | on |
| TRL's colocated engine | filters at another temperature | - | off, with a notice |
| the model's engine (Unsloth), a ``trl vllm-serve`` server | filters | processed log-probs (their mode is theirs) | off, with a notice |

``grpo_training.vllm_importance_sampling_correction``: null follows the rule; false turns the correction off;
true where the rule says off is refused with the settings to change. The filters themselves are not
corrected for on any path, as on ``model.generate``: they are part of how completions are sampled.

    >>> from llm_finetuning.rollout import ROLLOUTS
    >>> decision = importance_sampling(PipelineConfig(), ROLLOUTS["trl_colocate"])  # min_p 0.1 at temperature 1
    >>> decision.correction, decision.engine_logprobs
    (True, 'raw_logprobs')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import ConfigError, PipelineConfig
from .kinds import RolloutKind

__all__ = ["ImportanceSampling", "importance_sampling"]


@dataclass(frozen=True)
class ImportanceSampling:
    """The decision for one run: recorded in ``summary.json`` as ``importance_sampling``."""

    correction: bool  # TRL's vllm_importance_sampling_correction
    engine_logprobs: str | None  # the log-prob mode TRL's colocated engine is started with (None: not ours to set)
    reason: str

    def record(self) -> dict[str, Any]:
        return {"correction": self.correction, "engine_logprobs": self.engine_logprobs, "reason": self.reason}


def importance_sampling(config: PipelineConfig, rollouts: RolloutKind) -> ImportanceSampling:
    """The rule above for ``rollouts`` (the kind ``Backend.rollouts`` names); a ConfigError for a correction
    asked for where the engine cannot report the trainer's distribution."""
    asked = config.grpo_training.vllm_importance_sampling_correction
    if not rollouts.uses_vllm:
        return ImportanceSampling(False, None, f"GRPO generates with {rollouts.engine}: no engine to correct for")
    filters = _filters(config)
    temperature = config.rollout_sampling.temperature
    if not filters:
        mode = "processed_logprobs"
        reason = "vLLM's processed log-probs (temperature applied, no sampling filter) are the trainer's"
    elif rollouts.sets_logprob_mode and temperature == 1.0:
        mode = "raw_logprobs"
        reason = f"with {filters} at temperature 1, vLLM's raw log-probs are the trainer's"
    else:
        why = _why_not(rollouts, filters, temperature)
        if asked:
            raise ConfigError(
                f"grpo_training.vllm_importance_sampling_correction: true, but {why}, so every completion would "
                "be weighted by about zero; set it to null (off here), or drop the filter (grpo_training.min_p: 0, "
                "top_k: -1, top_p: 1.0)"
            )
        return ImportanceSampling(False, None, f"off: {why}")
    engine_mode = mode if rollouts.sets_logprob_mode else None
    if asked is False:
        return ImportanceSampling(False, engine_mode, "off, as configured")
    return ImportanceSampling(True, engine_mode, f"on: {reason}")


def _filters(config: PipelineConfig) -> str:
    """The sampling filters that truncate the distribution, as a phrase ('' when none)."""
    sampling = config.rollout_sampling
    named = [f"min_p {sampling.min_p:g}" if sampling.min_p > 0 else "",
             f"top_k {sampling.top_k}" if sampling.top_k > 0 else "",
             f"top_p {sampling.top_p:g}" if sampling.top_p < 1 else ""]  # fmt: skip
    return ", ".join(name for name in named if name)


def _why_not(rollouts: RolloutKind, filters: str, temperature: float) -> str:
    if rollouts.sets_logprob_mode:
        return (f"with {filters} at temperature {temperature:g} no vLLM log-prob mode reports the trainer's "
                "distribution (raw log-probs are before temperature)")  # fmt: skip
    return f"{rollouts.engine} reports log-probs after its sampling filters ({filters}), not the trainer's distribution"
