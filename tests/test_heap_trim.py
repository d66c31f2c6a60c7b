"""The C heap's free pages handed back to the system (runtime/heap.py), on real allocations of this process."""

from __future__ import annotations

import time

import psutil
import pytest

from llm_finetuning.config import ConfigError, PipelineConfig
from llm_finetuning.runtime.heap import HeapTrimmer, trim_heap

MIB = 2**20


def _fragmented_heap(total_mib: int) -> list[bytearray]:
    """``total_mib`` of 96 KiB blocks from malloc's heap (below its mmap threshold), each followed by a small block
    that stays live, so that freeing the large ones leaves holes in the middle of the heap, not at its top."""
    pins, blocks = [], []
    for _ in range(total_mib * 1024 // 96):
        blocks.append(bytearray(96 * 1024))  # zero-filled: resident, not just reserved
        pins.append(bytearray(1024))  # above pymalloc's 512 bytes: from malloc's heap too
    del blocks
    return pins


def test_the_trimmer_hands_freed_heap_pages_back_and_free_alone_does_not():
    if not trim_heap():
        pytest.skip("the C library has no malloc_trim (not glibc)")
    process = psutil.Process()
    before = process.memory_info().rss
    pins = _fragmented_heap(300)
    freed = process.memory_info().rss
    assert freed > before + 200 * MIB  # free() kept the holes resident: the problem the trimmer is for
    trimmer = HeapTrimmer.start(0.05)
    try:
        deadline = time.monotonic() + 5
        while trimmer.trims < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        trimmer.stop()
    assert trimmer.trims >= 2 and not trimmer.running
    assert process.memory_info().rss < freed - 200 * MIB  # the holes went back; the live blocks stayed
    assert len(pins) > 0


def test_no_interval_means_no_thread():
    trimmer = HeapTrimmer.start(None)
    assert not trimmer.running and trimmer.trims == 0
    trimmer.stop()  # stopping one that never ran is fine


@pytest.mark.parametrize("interval", [0, -1.0])
def test_a_trim_interval_must_be_positive(interval):
    with pytest.raises(ConfigError, match="heap_trim_interval"):
        PipelineConfig.from_dict({"heap_trim_interval": interval})
