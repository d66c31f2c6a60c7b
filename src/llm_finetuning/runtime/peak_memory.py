"""The peak resident memory of each part of a run, this process and its children together.

A run's memory is more than the training process's: vLLM's CPU engine, the reward verifier's sandboxed worker
and any process they start hold memory of their own. ``PeakMemory`` samples the resident set of the process
tree in a daemon thread (every ``interval`` seconds; a peak shorter than that can be missed) and keeps, for
each named part (``load``, ``sft``, ``grpo``, ``evaluation``, ...), the highest total seen while it was
running; parts may nest (an evaluation during GRPO counts for both). The main process's own peak is also read
exactly from the kernel (``VmHWM``, Linux), for the whole run. In a multi-process launch the record is the main
process's tree: the other ranks are the launcher's children, not its own.

    peaks = PeakMemory.start()
    with peaks.part("sft"):
        ...
    summary["memory"] = peaks.record()   # {"peak_rss_gib": {"sft": 2.31, ...}, "main_process_peak_gib": ...}
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .periodic import Periodic

__all__ = ["PeakMemory", "tree_rss"]

GIB = 2**30


def tree_rss() -> int:
    """Bytes resident now in this process and every process below it (0 where psutil cannot tell). A copy a
    process forked of itself (the sandbox's copy per call: same command line as its parent, never exec'd) shares
    its parent's pages, which its resident size counts again; it counts with the pages only it holds (USS)."""
    import psutil

    try:
        me = psutil.Process()
        processes = [me, *me.children(recursive=True)]
    except psutil.Error:
        return 0
    commands = {}
    for process in processes:
        with contextlib.suppress(psutil.Error):
            commands[process.pid] = process.cmdline()
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):  # a child may end between the listing and the reading
            command = commands.get(process.pid)
            copy = process is not me and command is not None and commands.get(process.ppid()) == command
            total += process.memory_full_info().uss if copy else process.memory_info().rss
    return total


def main_process_peak() -> int | None:
    """This process's peak resident bytes since it started (the kernel's ``VmHWM``; None where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class PeakMemory:
    """Per part of a run, the highest resident total of the process tree sampled while it ran (module docstring)."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peaks: dict[str, int] = {}
        self._active: list[str] = []
        self._lock = threading.Lock()
        self._sampler = Periodic(self.sample, interval, name="peak-memory")

    @classmethod
    def start(cls, interval: float = 0.5) -> PeakMemory:
        watcher = cls(interval)
        watcher._sampler.start()
        return watcher

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Count the samples taken while the body runs (one taken at its start and one at its end too) for
        ``name``; a part entered again keeps its highest peak."""
        with self._lock:
            self._active.append(name)
        self.sample()
        try:
            yield
        finally:
            self.sample()
            with self._lock:
                self._active.remove(name)

    def sample(self) -> None:
        rss = tree_rss()
        with self._lock:
            for name in self._active:
                self.peaks[name] = max(self.peaks.get(name, 0), rss)

    def record(self) -> dict[str, Any]:
        """What ``summary.json`` records: each part's peak and the main process's own, in GiB."""
        with self._lock:
            peaks = {name: round(value / GIB, 3) for name, value in self.peaks.items()}
        own = main_process_peak()
        return {"peak_rss_gib": peaks, "main_process_peak_gib": None if own is None else round(own / GIB, 3),
                "sampled_every_s": self.interval}  # fmt: skip

    def stop(self) -> None:
        self._sampler.stop()
