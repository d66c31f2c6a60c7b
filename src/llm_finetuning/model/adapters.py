"""Atomic saves of model directories: the previous save survives until the new one is complete.

Why: a long GRPO run writes its adapter many times, and a crash or a full disk in the middle of
``save_pretrained`` must not destroy the last good adapter. We write into a temporary sibling directory,
fsync every file and the directory, then swap it in with renames:

    path            -> .path.previous     (the old save, kept until the new one is in place)
    .path.tmp-XXXX  -> path
    .path.previous  -> deleted

A crash between the two renames leaves ``.path.previous`` behind; ``recover_previous(path)`` (called before
every save and load) moves it back. The renames stay on one filesystem because the siblings share a parent.

A save replaces only a save: the folder must be absent, empty, or carry ``SAVE_MARKER``, which every save
writes last (``check_replaceable``). Anything else (the run's own output folder, a folder of the user's that
a path setting happens to name) is refused in one line before anything is written, so a mistyped
``save_path`` or ``--merged`` can never delete it.

    >>> with atomic_directory("outputs/sft/final") as staging:      # doctest: +SKIP
    ...     model.save_pretrained(staging)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from ..errors import ModelError, os_error_code

__all__ = ["SAVE_MARKER", "atomic_directory", "check_replaceable", "fsync_tree", "mark_save", "recover_previous"]

logger = logging.getLogger(__name__)

SAVE_MARKER = ".llm_finetuning_save.json"  # written last into every save: this folder may be replaced by a save


def check_replaceable(path: str | Path) -> None:
    """Refuse, as a one-line ``ModelError``, to save over ``path`` unless it is absent, an empty folder, or an
    earlier save (it carries ``SAVE_MARKER``)."""
    path = Path(path)
    recover_previous(path)
    if not path.exists():
        return
    if not path.is_dir():
        raise ModelError(f"{path}: is a file, not a folder; choose another path to save to")
    if (path / SAVE_MARKER).is_file() or not any(path.iterdir()):
        return
    raise ModelError(
        f"{path}: holds files that are not a save of this tool; refusing to replace them (choose a new or empty "
        "folder, or move that one away yourself)"
    )


def mark_save(folder: str | Path, kind: str) -> None:
    """Mark ``folder`` as a save of ``kind`` (adapter, model, merged, gguf) that a later save may replace."""
    (Path(folder) / SAVE_MARKER).write_text(json.dumps({"kind": kind, "saved": round(time.time(), 3)}))


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
def atomic_directory(path: str | Path, kind: str = "adapter") -> Iterator[Path]:
    """Yield an empty staging directory; on success it replaces ``path`` (which ``check_replaceable`` must
    allow), marked as a save of ``kind``; on error it is deleted."""
    path = Path(path)
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        try:
            yield staging
        except Exception as exc:
            code = os_error_code(exc)
            if code is None:
                raise
            raise OSError(code, os.strerror(code), str(path)) from exc  # the disk's refusal, named as one
        mark_save(staging, kind)
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
