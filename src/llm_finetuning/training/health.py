"""Early warnings while GRPO trains: the signs, seen in small-model runs, that it is about to make the model worse.

Each warning is said once per run, on the console and in training.log, with the setting to change:

- **phantom advantages**: a share of the groups has no right answer but rewards that differ (format and number
  rewards), so GRPO pushes some wrong answers up (``advantages`` other than ``gated``);
- **shrinking completions**: the completions of the last steps are much shorter than those of the first ones,
  the mark of a policy that learns to stop early (seen on chain_sum: three-term sums cut after one operation);
- **collapsing entropy**: the completions' mean token entropy of the last steps is a small part of the first
  steps', the mark of a policy that writes one answer a problem, so its groups stop differing and GRPO stops
  learning (entropy halving over 40 steps, seen on chain_sum, did no harm: the bar is lower);
- **held-out accuracy below the start**: an evaluation during GRPO scores clearly (two standard errors) below
  where GRPO started (``selection.held_out_warning``, called by the run's evaluations).

    callback = GRPOHealth(config.grpo_training.advantages)      # a TrainerCallback of GRPOPhase
"""

from __future__ import annotations

import logging
import statistics

from transformers import TrainerCallback

__all__ = ["GRPOHealth"]

logger = logging.getLogger(__name__)

WINDOW = 5  # steps averaged at the start and at the end
PHANTOM = 0.2  # share of groups: all wrong, rewards differing
SHRINK = 0.75  # the last steps' completions this short against the first steps'
COLLAPSE = 0.25  # the last steps' entropy this small against the first steps'


class GRPOHealth(TrainerCallback):
    """Watches GRPO's logged figures and warns once per kind (module docstring)."""

    def __init__(self, advantages: str) -> None:
        self.advantages = advantages
        self.phantom: list[float] = []
        self.lengths: list[float] = []
        self.entropies: list[float] = []
        self.warned: set[str] = set()

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "groups/phantom" in logs:
            self.phantom.append(float(logs["groups/phantom"]))
        if "completions/mean_length" in logs:
            self.lengths.append(float(logs["completions/mean_length"]))
        if "entropy" in logs:
            self.entropies.append(float(logs["entropy"]))
        self._check_phantom(state.global_step)
        self._check_lengths(state.global_step)
        self._check_entropy(state.global_step)

    def _check_phantom(self, step: int) -> None:
        recent = self.phantom[-WINDOW:]
        if self.advantages == "gated" or len(recent) < WINDOW or statistics.fmean(recent) < PHANTOM:
            return
        self._warn("phantom", f"GRPO step {step}: {statistics.fmean(recent):.0%} of recent groups have no right "
                   "answer yet rewards that differ, so GRPO pushes wrong answers up (phantom advantages); set "
                   "grpo_training.advantages: gated")  # fmt: skip

    def _check_lengths(self, step: int) -> None:
        fall = _fallen(self.lengths, SHRINK)
        if fall is None:
            return
        first, last = fall
        self._warn("shrinking", f"GRPO step {step}: completions shrank from {first:.1f} to {last:.1f} tokens: the "
                   "policy may be learning to stop early; watch the held-out accuracy, and lower "
                   "grpo_training.learning_rate or set grpo_training.beta (a KL anchor to the SFT policy)")  # fmt: skip

    def _check_entropy(self, step: int) -> None:
        fall = _fallen(self.entropies, COLLAPSE)
        if fall is None:
            return
        first, last = fall
        self._warn("entropy", f"GRPO step {step}: the completions' entropy fell from {first:.3f} to {last:.3f}: "
                   "the policy is collapsing onto one answer a problem, so its groups stop differing; lower "
                   "grpo_training.learning_rate, raise grpo_training.temperature or set grpo_training.beta "
                   "(a KL anchor to the SFT policy)")  # fmt: skip

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self.warned:
            self.warned.add(kind)
            logger.warning(message)


def _fallen(values: list[float], ratio: float) -> tuple[float, float] | None:
    """The first and the last steps' means of ``values`` where the last fell below ``ratio`` times the first."""
    if len(values) < 2 * WINDOW:
        return None
    first, last = statistics.fmean(values[:WINDOW]), statistics.fmean(values[-WINDOW:])
    return (first, last) if last < ratio * first else None
