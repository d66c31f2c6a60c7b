"""Advantage estimators: how a generation batch's rewards become each completion's advantage in GRPO.

One function per estimator, registered by name with ``@estimator("name")``; ``grpo_training.advantages`` names
the one a run uses (checked before anything loads). An estimator sees the whole generation batch of every process
(``Scores``) and returns one advantage per completion, in batch order; a group is ``group`` consecutive
completions of one prompt. Adding one is writing a function here and naming it in the config (tests/test_advantages.py
adds one in a test and trains the tiny model with it).

``sum`` and ``normalize_then_sum`` are TRL's two aggregations, computed as TRL 1.15 computes them (the same
operations in the same order, so the same numbers); ``gated`` takes the advantages from correctness alone where a
group's answers differ in rightness (``training/advantages.py`` says why).

    >>> import torch
    >>> scores = Scores(torch.tensor([[1.], [0.], [1.], [1.]]), torch.tensor([1.]), torch.tensor([1., 0., 1., 1.]),
    ...                 group=2, scale="group", tie_weight=0.0)
    >>> [round(value, 3) for value in ESTIMATORS["gated"](scores).tolist()]
    [0.707, -0.707, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["ESTIMATORS", "Scores", "estimator"]

_EPSILON = 1e-4  # TRL's: a group whose rewards barely differ is not blown up to unit scale


@dataclass(frozen=True)
class Scores:
    """What an estimator sees: every completion of the generation batch, over every process."""

    rewards: torch.Tensor  # (completions, reward functions): each reward's score, NaN where it gave none
    weights: torch.Tensor  # (reward functions,): grpo's reward weights
    correct: torch.Tensor  # (completions,): the grader's verdict, 1.0 right, 0.0 wrong
    group: int  # completions per prompt, consecutive
    scale: str  # TRL's scale_rewards: group, batch or none
    tie_weight: float  # grpo_training.tie_weight


ESTIMATORS: dict[str, Callable[[Scores], torch.Tensor]] = {}


def estimator(name: str) -> Callable[[Callable[[Scores], torch.Tensor]], Callable[[Scores], torch.Tensor]]:
    """Register the decorated function as the advantage estimator ``name``."""

    def register(function: Callable[[Scores], torch.Tensor]) -> Callable[[Scores], torch.Tensor]:
        ESTIMATORS[name] = function
        return function

    return register


@estimator("sum")
def weighted_sum(scores: Scores) -> torch.Tensor:
    """The weighted sum of the rewards, centred on its group's mean and scaled as ``scale`` says (TRL's default,
    ``sum_then_normalize``)."""
    rewards = (scores.rewards * scores.weights.unsqueeze(0)).nansum(dim=1)
    rewards[torch.isnan(scores.rewards).all(dim=1)] = torch.nan  # no reward scored it: no advantage
    grouped = rewards.view(-1, scores.group)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(scores.group, dim=0)
    if scores.scale == "batch":
        std = _nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    else:
        std = _nanstd(grouped, dim=1).repeat_interleave(scores.group, dim=0)
    advantages = rewards - mean
    if scores.scale != "none":
        advantages = advantages / (std + _EPSILON)
    return torch.nan_to_num(advantages, nan=0.0)


@estimator("normalize_then_sum")
def normalize_then_sum(scores: Scores) -> torch.Tensor:
    """Each reward normalised within its group, then the weighted sum normalised over the batch (TRL's
    ``multi_objective_aggregation: normalize_then_sum``)."""
    functions = scores.rewards.shape[1]
    grouped = scores.rewards.view(-1, scores.group, functions)
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    reward_k = ((grouped - mean) / (_nanstd(grouped, dim=1, keepdim=True) + _EPSILON)).view(-1, functions)
    rewards = (reward_k * scores.weights.unsqueeze(0)).nansum(dim=1)
    rewards[torch.isnan(scores.rewards).all(dim=1)] = torch.nan
    std = _nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    return torch.nan_to_num((rewards - torch.nanmean(rewards)) / (std + _EPSILON), nan=0.0)


@estimator("gated")
def gated(scores: Scores) -> torch.Tensor:
    """From correctness where a group's answers differ in rightness; where they tie (all right, all wrong), from the
    rewards' weighted sum times ``tie_weight`` (0: such a group teaches nothing)."""
    right = scores.correct.view(-1, scores.group).float()
    shaped = torch.nan_to_num(scores.rewards * scores.weights.unsqueeze(0)).sum(dim=1)
    from_correct = _centred(right, scores.scale)
    from_shaping = _centred(shaped.view(-1, scores.group).float(), scores.scale) * scores.tie_weight
    ties = right.max(dim=1, keepdim=True).values == right.min(dim=1, keepdim=True).values
    return torch.where(ties, from_shaping, from_correct).reshape(-1)


def _centred(rewards: torch.Tensor, scale: str) -> torch.Tensor:
    """Rewards (one row per group) minus their group's mean, scaled as ``scale`` says."""
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + _EPSILON)
    if scale == "batch":
        return centred / (rewards.std() + _EPSILON)
    return centred


def _nanstd(tensor: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """TRL 1.15's ``nanstd``, step for step: the standard deviation (Bessel-corrected) ignoring NaNs."""
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True)
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance *= correction
    std = torch.sqrt(variance)
    if keepdim:
        return std
    return std.squeeze(dim) if dim is not None else std.squeeze()
