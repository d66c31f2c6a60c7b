"""Checkpoints that survive a crash mid-write: the marker that resume trusts.

Hugging Face writes ``checkpoint-N/`` file by file, so a crash can leave a half-written folder that looks
like a checkpoint. ``CheckpointMarker`` writes ``checkpoint_complete.json`` into the folder after the trainer
has saved it; resume only considers folders that carry the marker. In a multi-process run every rank writes
its own part of a checkpoint (its RNG state, its optimizer shard under DeepSpeed), so the marker waits for all
ranks and is written by the main process alone. (Which phases finished is ``run_outputs.RunState``.)

The marker carries the run's id, and resume takes only checkpoints of its own run: a folder an earlier run left
(with its own marker) is never continued by mistake. A checkpoint folder about to be written again loses its
old marker first, so it is never trusted while the trainer rewrites it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from transformers import TrainerCallback

from ..runtime.atomic_io import write_json_atomic
from ..runtime.distributed import barrier, is_main_process

MARKER = "checkpoint_complete.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def latest_complete_checkpoint(directory: str | Path, run_id: str | None = None) -> Path | None:
    """The newest ``checkpoint-N`` under ``directory`` whose completion marker names the run ``run_id``."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    complete = [
        (int(match.group(1)), path)
        for path in directory.iterdir()
        if (match := _CHECKPOINT.match(path.name)) and _marked_by(path, run_id)
    ]
    return max(complete)[1] if complete else None


def checkpoint_step(folder: Path) -> int:
    """The step a complete checkpoint was saved at (its marker says)."""
    return int(json.loads((folder / MARKER).read_text())["global_step"])


def _marked_by(folder: Path, run_id: str | None) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("run_id") == run_id


class CheckpointMarker(TrainerCallback):
    """Marks each checkpoint complete, with the run's id, once the trainer has finished writing it."""

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save and is_main_process():  # the trainer writes this folder next: not trusted until marked
            (Path(args.output_dir) / f"checkpoint-{state.global_step}" / MARKER).unlink(missing_ok=True)

    def on_save(self, args, state, control, **kwargs):
        barrier()  # every rank has written its part (the trainer itself does not wait for the others)
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if is_main_process() and folder.is_dir():
            write_json_atomic(folder / MARKER, {"global_step": state.global_step, "run_id": self.run_id})
