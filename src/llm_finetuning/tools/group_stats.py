"""Figures for GRPO groups: how different a prompt's K completions are, which tags they hold, how rewards spread.

GRPO learns from the differences inside a group: the advantage of a completion is its reward minus the
group's mean, divided by the group's std. A group whose completions coincide, or whose rewards are all equal,
gives every completion advantage 0 and teaches nothing. These pure functions measure exactly that, so
``debug_grpo`` can say why a run is not learning.

    >>> distinct_share(["a b", "a b", "a c", "a d"])
    0.75
    >>> round(mean_pairwise_similarity(["7 + 5 = 12", "7 + 5 = 12"]), 2)
    1.0
    >>> spread([1.0, 1.0, 1.0])
    {'mean': 1.0, 'std': 0.0}
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

__all__ = [
    "ZERO_STD",
    "distinct_share",
    "group_figures",
    "mean_pairwise_similarity",
    "overall_figures",
    "spread",
    "tag_presence",
]

ZERO_STD = 1e-6  # a group's rewards closer than this count as equal: TRL's advantage is then ~0 for all


def distinct_share(texts: Sequence[str]) -> float:
    """Distinct completions over completions: 1.0 = all differ, 1/K = all identical."""
    return round(len(set(texts)) / len(texts), 4) if texts else 0.0


def mean_pairwise_similarity(texts: Sequence[str]) -> float:
    """Mean ``difflib`` ratio over every pair, on whitespace tokens (1.0 = identical, 0.0 = nothing shared).

    Tokens rather than characters keep this fast on long completions and make a changed number count as
    one edit. A lone completion has nothing to compare with: 1.0.
    """
    pairs = list(itertools.combinations([text.split() for text in texts], 2))
    if not pairs:
        return 1.0
    ratios = [SequenceMatcher(None, a, b, autojunk=False).ratio() for a, b in pairs]
    return round(statistics.fmean(ratios), 4)


def tag_presence(texts: Sequence[str], tags: Sequence[str]) -> dict[str, float]:
    """Share of completions containing each tag."""
    return {tag: round(sum(tag in text for text in texts) / len(texts), 4) if texts else 0.0 for tag in tags}


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean and standard deviation (sample std, as TRL normalises advantages; 0 for a single value)."""
    values = [float(v) for v in values]
    if not values:
        return {"mean": 0.0, "std": 0.0}
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": round(statistics.fmean(values), 4), "std": round(std, 4)}


def group_figures(
    texts: Sequence[str],
    finished: Sequence[bool],
    tags: Sequence[str],
    rewards: Mapping[str, Sequence[float]],
    total: Sequence[float],
    correct: Sequence[bool] = (),
) -> dict[str, Any]:
    """The figures of one prompt's group: diversity, tags, each reward's and the total reward's spread, and, with
    ``correct`` (the grader's verdicts), whether no completion is right and, if so, whether the rewards still
    differ (a "phantom" advantage: GRPO would push some wrong answers up)."""
    total_spread = spread(total)
    all_wrong = bool(correct) and not any(correct)
    return {
        "correct": round(sum(correct) / len(correct), 4) if correct else 0.0,
        "all_wrong": all_wrong,
        "phantom": all_wrong and total_spread["std"] >= ZERO_STD,
        "distinct": distinct_share(texts),
        "similarity": mean_pairwise_similarity(texts),
        "tags": tag_presence(texts, tags),
        "rewards": {name: spread(scores) for name, scores in rewards.items()},
        "total_reward": total_spread,
        "zero_std": total_spread["std"] < ZERO_STD,
        "truncated": round(1 - sum(finished) / len(finished), 4) if finished else 0.0,
    }


def overall_figures(groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Figures over all groups; a reward's ``std`` is its mean within-group std (the spread GRPO learns from)."""
    if not groups:
        return {}

    def average(values: Any) -> float:
        return round(statistics.fmean(values), 4)

    first = groups[0]
    return {
        "distinct": average(g["distinct"] for g in groups),
        "similarity": average(g["similarity"] for g in groups),
        "tags": {tag: average(g["tags"][tag] for g in groups) for tag in first["tags"]},
        "rewards": {
            name: {
                "mean": average(g["rewards"][name]["mean"] for g in groups),
                "std": average(g["rewards"][name]["std"] for g in groups),
            }
            for name in first["rewards"]
        },
        "total_reward": {
            "mean": average(g["total_reward"]["mean"] for g in groups),
            "std": average(g["total_reward"]["std"] for g in groups),
        },
        "zero_std_groups": average(float(g["zero_std"]) for g in groups),
        "correct": average(g.get("correct", 0.0) for g in groups),
        "all_wrong_groups": average(float(g.get("all_wrong", False)) for g in groups),
        "phantom_groups": average(float(g.get("phantom", False)) for g in groups),
        "truncation_rate": average(g["truncated"] for g in groups),
    }
