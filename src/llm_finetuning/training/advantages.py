"""How GRPO turns a group's rewards into advantages, and what each group taught: the estimator and group signal.

The estimator is the one ``grpo_training.advantages`` names, from the registry in ``rewards/estimators.py``:
TRL's two aggregations (``sum``, ``normalize_then_sum``, computed as TRL computes them) or ``gated``. Under
either of TRL's, a group whose completions are all wrong still gets full-size advantages from the format and
number rewards, which differ between wrong answers: "phantom" advantages that teach whatever the wrong answers
that formatted best have in common (short ones, say). ``gated`` takes the advantages from correctness alone (the
math grader's verdict, the figure evaluation reports): in a group where correctness differs, right answers go up
and wrong ones down, whatever the shaping rewards say; only in a group where correctness ties (all right or all
wrong) do the shaping rewards speak, scaled by ``tie_weight`` (0: such a group teaches nothing).

The trainer's ``assign_advantages`` (``grpo_trainer.py``) applies the estimator to every process's groups.
Whatever the estimator, every step logs what its groups carried, per group (TRL's ``frac_reward_zero_std`` is per
batch under ``scale_rewards: batch``): ``groups/signal`` (share of groups whose advantages are not all zero),
``groups/all_right``, ``groups/all_wrong``, ``groups/phantom`` (all wrong, yet with differing rewards: what the
gate removes) and ``groups/correct`` (the share of completions the grader accepts, the training accuracy).

    >>> import torch
    >>> correct = torch.tensor([0., 0., 0., 1.])   # two groups of two: all wrong, mixed
    >>> total = torch.tensor([3., 1., 2., 2.])
    >>> group_figures(correct, total, torch.tensor([0., 0., -.7, .7]), group=2)["groups/phantom"]
    0.5
"""

from __future__ import annotations

import torch

__all__ = ["group_figures", "teaching_groups"]


def teaching_groups(advantages: torch.Tensor, group: int) -> torch.Tensor:
    """Per group of ``group`` consecutive completions, whether any advantage is non-zero (the group teaches)."""
    return advantages.view(-1, group).abs().amax(dim=1) > 1e-6


def group_figures(correct: torch.Tensor, total: torch.Tensor, advantages: torch.Tensor,
                  group: int) -> dict[str, float]:  # fmt: skip
    """What the step's groups carried (module docstring), from the whole generation batch."""
    right = correct.view(-1, group).float()
    spread = total.view(-1, group).float().std(dim=1) > 0
    all_right, all_wrong = right.min(dim=1).values == 1, right.max(dim=1).values == 0
    signal = teaching_groups(advantages, group)
    return {
        "groups/signal": signal.float().mean().item(),
        "groups/all_right": all_right.float().mean().item(),
        "groups/all_wrong": all_wrong.float().mean().item(),
        "groups/phantom": (all_wrong & spread).float().mean().item(),
        "groups/correct": right.mean().item(),
    }
