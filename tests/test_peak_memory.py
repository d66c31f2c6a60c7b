"""The peak memory of a run's parts (runtime/peak_memory.py), on real allocations: this process's and a child's."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from llm_finetuning.runtime.peak_memory import GIB, PeakMemory, tree_rss

MIB = 2**20
HOLD_CHILD = "import sys, time; block = bytearray(300 * 2**20); block[::4096] = b'x' * len(block[::4096]); print('ready', flush=True); time.sleep(30)"


def test_a_part_keeps_the_peak_of_what_it_allocated_and_freed():
    watcher = PeakMemory.start(interval=0.02)
    try:
        before, own_before = tree_rss(), psutil.Process().memory_info().rss  # the tree includes earlier workers
        with watcher.part("outer"):
            with watcher.part("inner"):
                block = bytearray(400 * MIB)
                block[::4096] = b"x" * len(block[::4096])  # touched: resident, not just reserved
                time.sleep(0.2)
                del block
            with watcher.part("after"):
                time.sleep(0.1)
        record = watcher.record()
    finally:
        watcher.stop()
    peaks = record["peak_rss_gib"]
    assert peaks["inner"] * GIB >= before + 350 * MIB  # the freed block is still in the part's peak
    assert peaks["outer"] >= peaks["inner"]  # nested parts count for both
    assert peaks["after"] * GIB < before + 200 * MIB  # a later part does not inherit an earlier peak
    assert record["main_process_peak_gib"] * GIB >= own_before + 350 * MIB  # the kernel's own high-water mark


def test_a_childs_memory_counts_toward_the_part():
    watcher = PeakMemory.start(interval=0.05)
    alone = tree_rss()
    child = subprocess.Popen([sys.executable, "-c", HOLD_CHILD], stdout=subprocess.PIPE, text=True)
    try:
        with watcher.part("with_child"):
            assert child.stdout.readline().strip() == "ready"
            time.sleep(0.3)
        assert watcher.peaks["with_child"] >= alone + 250 * MIB  # the child's 300 MiB on top of this process
    finally:
        child.kill()
        child.wait()
        watcher.stop()


FORKING_CHILD = (
    "import os, sys, time\nblock = bytearray(300 * 2**20)\nblock[::4096] = b'x' * len(block[::4096])\n"
    "if os.fork() == 0:\n    if sys.argv[1] == 'writes':\n        block[::4096] = b'y' * len(block[::4096])\n"
    "    print('ready', flush=True)\ntime.sleep(30)\n"
)


def test_a_forked_copy_counts_only_the_pages_it_holds_alone():
    """The sandbox forks a copy of its worker per call: the pages the copy shares with the worker count once."""
    alone, grown = tree_rss(), {}
    for mode in ("reads", "writes"):
        child = subprocess.Popen([sys.executable, "-c", FORKING_CHILD, mode], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(0.2)
            grown[mode] = tree_rss() - alone
        finally:
            for process in psutil.Process(child.pid).children():
                process.kill()
            child.kill()
            child.wait()
    assert 250 * MIB < grown["reads"] < 400 * MIB  # the block once: its pages are shared
    assert grown["writes"] > 550 * MIB  # written in the copy: its own pages, counted
