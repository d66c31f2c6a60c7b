"""Many completions sampled per problem, few trained on: ``grpo_training.train_per_group`` (PODS' max-variance
down-sampling, arXiv 2504.13818).

On a CPU, and for a small model on a GPU, generating a completion costs a fraction of training on it (a forward
pass with the KV cache against a forward and a backward pass through the adapter). A large group is the cheap
way to find out whether a problem sits at the edge of what the policy can do (with a pass rate of 1 in 10, a
group of 8 holds a right answer 57 % of the time, a group of 16 81 %); training on all of it is the expensive
part. With ``train_per_group: m`` every group of ``num_generations`` completions is generated and scored whole
(its advantages, the curriculum's pass rates and the logged figures see all of it), and the step trains on ``m``
of them: those whose advantages spread the most (``widest_rows``). Under the correctness gate that is as many
right answers as wrong ones where the group has them (1 right of 16 and m = 4: the right one and three wrong).
The kept completions' advantages are then the estimator's over the kept ones, as though the group had been
those ``m`` (``GRPOStep.choose_groups``), so a kept group teaches like a group of ``m`` with that spread.

    >>> widest_rows([0.9, -0.1, -0.1, -0.1, -0.1], keep=2)
    [0, 1]
    >>> widest_rows([1.0, 1.0, 1.0, -1.0, -1.0, -1.0], keep=4)
    [0, 1, 3, 4]
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["widest_rows"]


def widest_rows(advantages: Sequence[float], keep: int) -> list[int]:
    """The ``keep`` members of one group whose advantages have the largest variance, in the group's order.

    A subset of largest variance is made of the ``i`` highest values and the ``keep - i`` lowest for some ``i``
    (PODS, Theorem 1), so each split is tried; among equal variances the most even split wins, and among equal
    values the members sampled first."""
    count = len(advantages)
    if keep >= count:
        return list(range(count))
    # highest first, then in the order sampled; and lowest first
    ranked = sorted(range(count), key=lambda index: (-advantages[index], index))
    lowest_first = sorted(range(count), key=lambda index: (advantages[index], index))
    best: tuple[float, int] | None = None
    chosen: list[int] = []
    for top in range(keep + 1):
        members = ranked[:top] + lowest_first[: keep - top]
        if len(set(members)) < keep:  # the top and the bottom overlap: fewer than keep distinct members
            continue
        values = [advantages[index] for index in members]
        mean = sum(values) / keep
        variance = sum((value - mean) ** 2 for value in values) / keep
        score = (round(variance, 12), -abs(2 * top - keep))
        if best is None or score > best:
            best, chosen = score, members
    return sorted(chosen)
