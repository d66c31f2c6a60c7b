"""How many of a generate call's requests vLLM runs at once: as many as its KV cache holds to their last token.

vLLM's scheduler admits a waiting request once its prompt fits in the cache (up to ``max_num_seqs``, 256 on
the engines here), and when a running request later needs a block that is not free it preempts the newest one,
whose prompt and tokens are computed again when it is readmitted. A CPU's cache is small (256 MiB: 364 blocks
of 32 tokens for SmolLM2-135M), so an evaluation's 400 requests were admitted 256 at a time and preempted one
another 140 times in the greedy pass and 276 in the sampled one; admitted only as many as the cache holds to
their last token (120 there), none is preempted and the two passes took 6-9 % less time (docs/benchmarks.md).
Fewer than that (72) runs smaller batches and is slower again, so the limit is the cache's exact capacity:
the cache's blocks less the one vLLM keeps empty, the blocks every prompt of the call shares (prefix caching
keeps one copy) counted once, and each request's own blocks up to its prompt plus ``max_tokens``.

The limit is set on the scheduler of an engine in this process for the call (``admitted_within_cache``) and put
back after it. Where the cache holds more than ``max_num_seqs`` (a GPU's, as a rule) nothing changes; an engine
whose scheduler runs in another process (vLLM's multiprocessing) keeps its own scheduling, as do GRPO's
rollouts, which TRL sends itself (a step's 64 requests fit the cache as they are).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["admitted_within_cache", "sequences_cache_holds"]

logger = logging.getLogger(__name__)


def sequences_cache_holds(prompts: Sequence[Sequence[int]], max_tokens: int, blocks: int, block_size: int) -> int:
    """How many of the requests for ``prompts`` (token ids), each generating up to ``max_tokens``, a cache of
    ``blocks`` blocks of ``block_size`` tokens holds at once to their last token (at least 1)."""
    # whole blocks only, as vLLM caches them, and never a prompt's last token: vLLM computes that one anew
    reusable = min(len(os.path.commonprefix(list(prompts))), min(len(prompt) for prompt in prompts) - 1)
    shared = max(0, reusable) // block_size
    longest = max(len(prompt) for prompt in prompts) + max_tokens
    own = max(1, math.ceil(longest / block_size) - shared)
    return max(1, (blocks - shared) // own)


@contextmanager
def admitted_within_cache(llm: Any, prompts: Sequence[Sequence[int]], max_tokens: int) -> Iterator[None]:
    """While the block runs, ``llm``'s scheduler admits no more of the requests for ``prompts`` than its KV cache
    holds to their last token (``sequences_cache_holds``); an engine whose scheduler runs in another process is
    left as it is."""
    scheduler = _in_process_scheduler(llm)
    if scheduler is None or not prompts:
        yield
        return
    configured = scheduler.max_num_active_reqs
    blocks = scheduler.kv_cache_config.num_blocks - 1  # vLLM's block pool keeps one as its null block
    holds = sequences_cache_holds(prompts, max_tokens, blocks, scheduler.block_size)
    scheduler.max_num_active_reqs = min(configured, holds)
    if holds < configured:
        logger.debug("vLLM admits %d requests at once (of %d): what its KV cache holds", holds, configured)
    try:
        yield
    finally:
        scheduler.max_num_active_reqs = configured


def _in_process_scheduler(llm: Any) -> Any | None:
    """The scheduler of ``llm``'s engine core when that core runs in this process (vLLM's ``InprocClient``)."""
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    scheduler = getattr(getattr(client, "engine_core", None), "scheduler", None)
    needed = ("max_num_active_reqs", "kv_cache_config", "block_size")
    return scheduler if all(hasattr(scheduler, name) for name in needed) else None

