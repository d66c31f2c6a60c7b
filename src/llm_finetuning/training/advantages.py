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

``grpo_training.negative_weight`` scales the advantages below zero of the completions a step trains on
(``weigh_negatives``), after the groups are chosen, so what is chosen and logged above is the estimator's alone.
Under the gate a group's pushes up and down are equal in sum; the weight sets how hard the wrong answers are
pushed down against the right ones pushed up: below 1 toward reinforcing right answers only (what expert
iteration does), above 1 toward suppressing wrong ones (arXiv 2506.01347's weighted REINFORCE). Each step logs
``advantages/negative_share``, the wrong answers' part of the advantages' absolute sum.

    >>> [round(value, 3) for value in weigh_negatives(torch.tensor([0.6, -0.2, -0.2, -0.2, 0.0]), 0.5).tolist()]
    [0.6, -0.1, -0.1, -0.1, 0.0]
    >>> round(negative_share(torch.tensor([0.6, -0.1, -0.1, -0.1])), 3)
    0.333
"""

from __future__ import annotations

import torch

__all__ = ["group_figures", "negative_share", "teaching_groups", "weigh_negatives"]


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


def weigh_negatives(advantages: torch.Tensor, weight: float) -> torch.Tensor:
    """``advantages`` (per completion, or per token) with those below zero times ``weight``."""
    if weight == 1.0:
        return advantages
    return torch.where(advantages < 0, advantages * weight, advantages)


def negative_share(advantages: torch.Tensor) -> float:
    """The part of the advantages' absolute sum that is below zero (0 where every advantage is 0)."""
    total = advantages.abs().sum().item()
    return advantages.clamp(max=0).abs().sum().item() / total if total > 0 else 0.0
