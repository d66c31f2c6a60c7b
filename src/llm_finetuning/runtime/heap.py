"""Giving the C heap's free pages back to the system, once (``trim_heap``) or every few seconds of a run
(``HeapTrimmer``), and bounding what oneDNN keeps live on it (``bound_onednn_cache``).

glibc's malloc keeps what a process frees for its next requests and returns little of it: each large free raises
its mmap threshold (up to 32 MiB), after which a step's activations, a vLLM batch's buffers and a trainer's
tensors of ever-changing sizes come from the heap, and the free holes between live blocks stay resident. On
SmolLM2-135M the heap grew through every phase of a run (SFT 1.1 -> 2.4 GB in 60 steps, an evaluation by 0.6 GB,
GRPO by 0.03 GB a step), and at GRPO's steady state about half of it was free (glibc's ``mallinfo2``: 0.9-1.5 GB
in use, 0.9-1.5 GB free). ``malloc_trim(0)`` hands every free page back, in the middle of the heap too; what is
live stays. Trimming every second from a thread bounds the resident set by what is live plus what a second
allocates, whatever runs (a trainer's step, a vLLM ``generate`` call, a checkpoint save): the real-model run's
peak 6.9 -> 4.5 GiB with the same figures and step times (12 GRPO steps alone: 4.9 -> 3.2 GiB, steps up to 5 %
longer, since pages freed and used again are faulted in anew), docs/benchmarks.md. Elsewhere than glibc (macOS,
musl) nothing is done.

    trimmer = HeapTrimmer.start(interval=1.0)    # None: never
    ...
    trimmer.stop()

What is live stays, and part of that was oneDNN's (torch's CPU matmuls in bf16, vLLM's CPU linear layers): it
keeps up to 1,024 compiled primitives with their buffers, and every new batch shape (each SFT batch's padded
length, each GRPO step's prompt and completion lengths) makes new ones. On SmolLM2-135M, 30 SFT steps left 0.92 GB
in use on the heap once the trainer was freed against 0.41 GB after loading; with 64 primitives kept, 0.70 GB.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

from .periodic import Periodic

__all__ = ["ONEDNN_CACHE_CAPACITY", "HeapTrimmer", "bound_onednn_cache", "onednn_cache_capacity", "trim_heap"]

_CAPACITY_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
ONEDNN_CACHE_CAPACITY = 64  # primitives; a step reuses its few shapes across every layer, and a new step's are new


def bound_onednn_cache() -> str:
    """Keep oneDNN's primitive cache to ``ONEDNN_CACHE_CAPACITY`` in this process (oneDNN reads the variable when it
    builds its first primitive, so before any matmul); a capacity the user set is kept. Returns the one in force."""
    return os.environ.setdefault(_CAPACITY_VARIABLE, str(ONEDNN_CACHE_CAPACITY))


def onednn_cache_capacity() -> int | str | None:
    """The primitive cache capacity oneDNN reads in this process, as summary.json records it: a number of
    primitives, the variable's text where it is not one, None where it is unset (oneDNN's default, 1,024)."""
    value = os.environ.get(_CAPACITY_VARIABLE)
    return int(value) if value is not None and value.strip().isdigit() else value


def trim_heap() -> bool:
    """Give the C heap's free pages to the system now; False where the C library has no ``malloc_trim``."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator is left as it is
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapTrimmer:
    """Trims the heap every ``interval`` seconds from a daemon thread until ``stop``."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.trims = 0
        self._trimmer = Periodic(self._trim, interval, name="heap-trim")

    @classmethod
    def start(cls, interval: float | None) -> HeapTrimmer:
        """A trimmer running every ``interval`` seconds (None, or a C library without ``malloc_trim``: one that
        never trims)."""
        trimmer = cls(interval or 0.0)
        if interval and _malloc_trim() is not None:
            trimmer._trimmer.start()
        return trimmer

    @property
    def running(self) -> bool:
        return self._trimmer.running

    def stop(self) -> None:
        self._trimmer.stop()

    def _trim(self) -> None:
        trim_heap()
        self.trims += 1
