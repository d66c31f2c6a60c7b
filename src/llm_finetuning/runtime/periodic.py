"""A call repeated every few seconds in a daemon thread, for as long as a run lasts: ``PeakMemory``'s sampling
and ``HeapTrimmer``'s trims.

    every = Periodic(sample, interval=0.5, name="peak-memory").start()
    ...
    every.stop()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Periodic"]

logger = logging.getLogger(__name__)


class Periodic:
    """Calls ``action`` every ``interval`` seconds from ``start`` until ``stop``; a call that fails is logged (at
    debug level) and the next one comes as planned, so a helper thread never ends a run."""

    def __init__(self, action: Callable[[], object], interval: float, name: str) -> None:
        self.action, self.interval, self.name = action, interval, name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Periodic:
        self._thread = threading.Thread(target=self._repeat, name=self.name, daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _repeat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.action()
            except Exception:
                logger.debug("%s: the call failed", self.name, exc_info=True)
