"""One run per output folder: an exclusive lock on ``<output_dir>/.run.lock`` for the run's main process.

Two runs writing one folder corrupt each other: their ``metrics.jsonl`` lines interleave, a fresh start deletes
the other's metrics, both rewrite ``summary.json`` and the adapters. So the main process takes an exclusive
``flock`` on the lock file before it writes anything, and holds it until the run ends. A second run finds it
held, says who holds it (process, machine, start time, command) and stops with exit status 2. The kernel
releases the lock when its process dies however it dies, so a lock file left by a killed run is simply taken
over, and the log says so. (``flock`` is advisory and local: on some network filesystems it does not hold.)

    >>> with RunLock.take(Path("outputs/tiny")):      # doctest: +SKIP
    ...     ...
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Self

from ..errors import PipelineError

__all__ = ["LOCK_FILE", "RunLock"]

logger = logging.getLogger(__name__)

LOCK_FILE = ".run.lock"


class RunLock:
    """The held lock of one output folder; ``release()`` (or leaving the ``with`` block) gives it up."""

    def __init__(self, handle: Any, path: Path, taken_over: str | None = None) -> None:
        self.handle, self.path = handle, path
        self.taken_over = taken_over  # the run that died holding the lock, described; None if it was free

    @classmethod
    def take(cls, output_dir: Path) -> RunLock:
        """Create ``output_dir`` if needed and lock it; a ``PipelineError`` naming the holder when another run has it."""
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
            path = output_dir / LOCK_FILE
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the run's whole life
        except OSError as exc:
            raise PipelineError(f"output_dir {output_dir}: cannot be written ({exc.strerror}); choose a folder "
                                "you can write to") from None  # fmt: skip
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read(handle))
            handle.close()
            raise PipelineError(
                f"output_dir {output_dir} is in use by another run ({holder}); wait for it to finish, or give this "
                "run another --output-dir"
            ) from None
        previous = _read(handle)
        _write(handle, {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                        "command": " ".join(sys.argv)[:300]})  # fmt: skip
        return cls(handle, path, _describe(previous) if previous.get("pid") else None)

    def say_if_taken_over(self) -> None:
        """Log (once logging writes training.log) that the lock was left by a run that died holding it."""
        if self.taken_over:
            logger.warning("output_dir %s: took over the lock left by a run that is no longer running (%s)",
                           self.path.parent, self.taken_over)  # fmt: skip

    def release(self) -> None:
        """Empty the lock file (a later run finds no one to take over from) and unlock it."""
        if self.handle.closed:
            return
        try:
            _write(self.handle, None)
        except OSError:  # a full disk: the kernel's lock is what counts, and it goes with the close
            pass
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(handle: Any) -> dict[str, Any]:
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _write(handle: Any, record: dict[str, Any] | None) -> None:
    handle.seek(0)
    handle.truncate()
    if record is not None:
        handle.write(json.dumps(record))
    handle.flush()


def _describe(record: dict[str, Any]) -> str:
    if not record.get("pid"):
        return "holder unknown"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("started") or 0))
    return f"process {record['pid']} on {record.get('host', '?')} since {started}: {record.get('command', '?')}"
