"""Evaluation across the processes of a multi-process run: each rank generates a share, every rank gets all.

Why sharded rather than on the main process alone: every rank holds the model, so N processes evaluate about
N times faster; no rank sits in a barrier while another generates for minutes (NCCL gives up on a barrier
after its timeout); and under ZeRO-3 every rank must take part in each forward pass anyway.

Why whole batches: the problems are cut into the batches a single process would generate (``batch_size``
each, in order), and rank r takes batches r, r + N, r + 2N, ... Each batch holds the same prompts with the
same padding as in one process, so greedy completions — and every figure scored from them — are the ones a
single-process evaluation gives. (Sampled completions come from each rank's own random stream.) The
completions are gathered to every rank in problem order, and each rank scores them all, so every rank
records the same figures.

    >>> generate_sharded(lambda prompts: [[p.upper()] for p in prompts], ["a", "b"], batch_size=1)
    [['A'], ['B']]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..runtime.distributed import gather_objects, rank, world_size

__all__ = ["generate_sharded", "own_share", "shard_batches"]

P = TypeVar("P")
Groups = list[list[Any]]  # per prompt, its completions


def shard_batches(count: int, batch_size: int, ranks: int, lockstep: bool = False) -> list[list[range]]:
    """For each rank, the batches (as index ranges) it generates: whole batches, dealt round-robin.

    With ``lockstep`` every rank gets the same number of batches: a rank short of one repeats its first batch
    (or the first batch of all) and the repeat's completions are dropped. Generation under ZeRO-3 needs this:
    each generated token is a collective step that every rank must take.
    """
    batches = [range(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]
    shares = [batches[r::ranks] for r in range(ranks)]
    if lockstep and batches:
        most = max(len(share) for share in shares)
        shares = [share + [(share or batches)[0]] * (most - len(share)) for share in shares]
    return shares


def own_share(count: int, batch_size: int, lockstep: bool = False) -> int:
    """How many of ``count`` prompts this rank generates (all of them in a single process)."""
    if world_size() == 1:
        return count
    return sum(len(batch) for batch in shard_batches(count, batch_size, world_size(), lockstep)[rank()])


def generate_sharded(
    generate: Callable[[list[P]], Groups], prompts: Sequence[P], batch_size: int, lockstep: bool = False
) -> Groups:
    """``generate(prompts)`` split over the ranks by whole batches; the groups of every prompt, on every rank."""
    ranks = world_size()
    if ranks == 1:
        return generate(list(prompts))
    share = shard_batches(len(prompts), batch_size, ranks, lockstep)[rank()]
    mine = [index for batch in share for index in batch]
    groups = generate([prompts[index] for index in mine]) if mine else []
    results: Groups = [[] for _ in prompts]
    seen: set[int] = set()
    for pairs in gather_objects(list(zip(mine, groups, strict=True))):
        for index, group in pairs:
            if index not in seen:  # a lockstep repeat: the first copy stands
                seen.add(index)
                results[index] = group
    return results
