"""Each part of a run's peak resident memory (engines and workers included), recorded in ``summary.json``
(``memory``) as soon as the part ends; and the C heap's free pages handed back to the system while it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..runtime.heap import HeapTrimmer, onednn_cache_capacity
from ..runtime.peak_memory import PeakMemory
from .run_outputs import RunRecorder


class RunMemory:
    """Watches the run's memory from its start until ``stop``."""

    def __init__(self, recorder: RunRecorder, heap_trim_interval: float | None) -> None:
        self.recorder = recorder
        self.peaks = PeakMemory.start()
        self.trimmer = HeapTrimmer.start(heap_trim_interval)

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """A part of the run whose peak the summary records, as soon as it ends."""
        with self.peaks.part(name):
            yield
        trimmed = self.trimmer.interval if self.trimmer.running else None
        self.recorder.set(memory={**self.peaks.record(), "heap_trimmed_every_s": trimmed,
                                  "onednn_primitive_cache": onednn_cache_capacity()})  # fmt: skip

    def stop(self) -> None:
        self.peaks.stop()
        self.trimmer.stop()
