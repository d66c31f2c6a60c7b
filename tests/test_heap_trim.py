"""The C heap's free pages handed back to the system (runtime/heap.py), on real allocations of this process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
import torch

from llm_finetuning.config import ConfigError, PipelineConfig
from llm_finetuning.runtime.heap import (
    ONEDNN_CACHE_CAPACITY,
    HeapTrimmer,
    bound_onednn_cache,
    onednn_cache_capacity,
    trim_heap,
)

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


_MANY_SHAPES = """
import ctypes, sys
import torch
from llm_finetuning.runtime.heap import bound_onednn_cache
if sys.argv[1] == "bounded":
    bound_onednn_cache()
weight = torch.randn(1536, 576, dtype=torch.bfloat16, requires_grad=True)
for rows in range(200, 1400, 4):  # a batch shape per step, as SFT's padded lengths and GRPO's steps make
    torch.nn.functional.linear(torch.randn(rows, 576, dtype=torch.bfloat16, requires_grad=True), weight).sum().backward()
libc = ctypes.CDLL("libc.so.6")
libc.malloc_trim(0)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
print(libc.mallinfo2().uordblks)
"""


def test_a_bounded_onednn_cache_keeps_less_live_on_the_heap():
    """oneDNN builds primitives for every new matmul shape and keeps up to 1,024 of them with their buffers; bounded,
    300 shapes leave far less in use on the heap (measured: 0.61 against 0.36 GB)."""
    if not trim_heap() or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("glibc's mallinfo2 and oneDNN's bf16 matmuls are needed to see it")
    env = {key: value for key, value in os.environ.items() if key != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    env["OMP_NUM_THREADS"] = "1"
    in_use = {}
    for mode in ("default", "bounded"):
        done = subprocess.run([sys.executable, "-c", _MANY_SHAPES, mode], env=env, capture_output=True, text=True,
                              timeout=300, check=True)  # fmt: skip
        in_use[mode] = int(done.stdout.split()[-1])
    assert in_use["bounded"] < in_use["default"] - 100 * MIB, in_use


def test_a_onednn_cache_capacity_the_user_set_is_kept_and_recorded_as_in_force(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    assert onednn_cache_capacity() is None  # oneDNN's own default
    assert bound_onednn_cache() == str(ONEDNN_CACHE_CAPACITY) == os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"]
    assert onednn_cache_capacity() == ONEDNN_CACHE_CAPACITY
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "512")
    assert bound_onednn_cache() == "512" and onednn_cache_capacity() == 512
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "lots")
    assert onednn_cache_capacity() == "lots"  # recorded as the user wrote it
