"""Atomic saves of model directories: the previous save survives until the new one is complete.

Why: a long GRPO run writes its adapter many times, and a crash or a full disk in the middle of
``save_pretrained`` must not destroy the last good adapter. We write into a temporary sibling directory,
fsync every file and the directory, then swap it in with renames:

    path            -> .path.previous     (the old save, kept until the new one is in place)
    .path.tmp-XXXX  -> path
    .path.previous  -> deleted

A crash between the two renames leaves ``.path.previous`` behind; ``recover_previous(path)`` (called before
every save and load) moves it back. The renames stay on one filesystem because the siblings share a parent.

    >>> with atomic_directory("outputs/sft/final") as staging:      # doctest: +SKIP
    ...     model.save_pretrained(staging)
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_directory", "fsync_tree", "recover_previous"]

logger = logging.getLogger(__name__)


def _previous(path: Path) -> Path:
    return path.parent / f".{path.name}.previous"


def recover_previous(path: str | Path) -> None:
    """Put back a previous save left aside by a swap that crashed half-way."""
    path = Path(path)
    previous = _previous(path)
    if previous.is_dir() and not path.exists():
        logger.warning("restoring %s from %s (an earlier save was interrupted)", path, previous)
        os.replace(previous, path)
    elif previous.is_dir():
        shutil.rmtree(previous)


def fsync_tree(directory: Path) -> None:
    """Flush every file under ``directory``, and the directories themselves, to disk."""
    for root, _dirs, files in os.walk(directory):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                os.fsync(handle.fileno())
        _fsync_dir(Path(root))


def _fsync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory; on success it replaces ``path``, on error it is deleted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    recover_previous(path)
    staging = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        yield staging
        fsync_tree(staging)
        _swap_in(staging, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(staging: Path, path: Path) -> None:
    previous = _previous(path)
    if path.exists():
        os.replace(path, previous)
    os.replace(staging, path)
    _fsync_dir(path.parent)
    shutil.rmtree(previous, ignore_errors=True)
