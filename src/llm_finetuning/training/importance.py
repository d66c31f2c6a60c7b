"""GRPO's importance-sampling correction computed in the loss pass, without TRL's extra forward pass.

Whether the correction is on is the rule of ``rollout/importance.py``. TRL computes it against the trainer's
"old" log-probs of each generated batch, which it gets from a no-grad forward pass over the whole batch right
after generating. When each generated batch trains exactly one optimizer step (``num_iterations`` 1, generation
aligned with gradient accumulation), the weights do not move between that pass and the loss, so the old
log-probs are the loss pass's own, detached. Where ``applies``, the trainer (``grpo_trainer.py``) makes TRL
skip its pass and computes the same ratio inside the loss (``ratio_and_metrics``) with TRL's formula (per token or per sequence, truncated or masked at its bounds), and logs
the figures TRL logs (``sampling/importance_sampling_ratio/*``, ``sampling/sampling_logp_difference/*``).
Measured on SmolLM2-135M: TRL's pass was 4.8 s of a 23 s GRPO step (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["applies", "importance_ratio", "ratio_and_metrics"]

_SEQUENCE_MODES = ("sequence_mask", "sequence_truncate")


def applies(trainer: Any) -> bool:
    """Whether the loss pass's log-probs are the old ones: one optimizer step per generated batch."""
    args = trainer.args
    generate_every = args.steps_per_generation * trainer.num_iterations
    return (trainer.use_vllm and trainer.vllm_importance_sampling_correction and trainer.num_iterations == 1
            and args.gradient_accumulation_steps % generate_every == 0 and trainer.loss_type != "vespo")  # fmt: skip


def importance_ratio(trainer_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor, mode: str,
                     clip_min: float | None, clip_max: float | None) -> torch.Tensor:  # fmt: skip
    """TRL's vLLM importance-sampling ratio: per token ``(B, T)`` or per sequence ``(B, 1)``, truncated or masked."""
    diff = torch.nan_to_num((trainer_logps - sampling_logps) * mask, nan=0.0)  # unscored tokens: no correction
    if mode in _SEQUENCE_MODES:
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("_truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def ratio_and_metrics(trainer: Any, trainer_logps: torch.Tensor, inputs: dict) -> torch.Tensor:
    """The ratio of a training batch ``inputs`` from the loss pass's own log-probs (detached), and TRL's figures."""
    mask = inputs["completion_mask"] * inputs["tool_mask"] if "tool_mask" in inputs else inputs["completion_mask"]
    sampling = inputs["sampling_per_token_logps"]
    mode = trainer.vllm_importance_sampling_mode
    ratio = importance_ratio(trainer_logps, sampling, mask, mode, trainer.vllm_importance_sampling_clip_min,
                             trainer.vllm_importance_sampling_clip_max)  # fmt: skip
    scored = mask.bool()
    delta = torch.abs(trainer_logps - sampling)[scored & ~torch.isnan(sampling)]
    ratios = ratio.flatten() if mode in _SEQUENCE_MODES else ratio[scored]
    gather, metrics = trainer.accelerator.gather, trainer._metrics["train" if trainer.model.training else "eval"]
    figures = {"sampling/sampling_logp_difference/mean": (delta, torch.mean, "mean"),
               "sampling/sampling_logp_difference/max": (delta, torch.max, "max"),
               "sampling/importance_sampling_ratio/min": (ratios, torch.min, "min"),
               "sampling/importance_sampling_ratio/mean": (ratios, torch.mean, "mean"),
               "sampling/importance_sampling_ratio/max": (ratios, torch.max, "max")}  # fmt: skip
    for name, (values, reduce, across) in figures.items():
        value = reduce(values) if values.numel() else torch.zeros((), device=trainer_logps.device)
        gathered = gather(value.reshape(1))
        metrics[name].append(getattr(gathered, across)().item())
    return ratio
