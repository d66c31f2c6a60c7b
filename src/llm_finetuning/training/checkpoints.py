"""Checkpoints that survive a crash mid-write: the marker that resume trusts.

Hugging Face writes ``checkpoint-N/`` file by file, so a crash can leave a half-written folder that looks
like a checkpoint. ``CheckpointMarker`` writes ``checkpoint_complete.json`` into the folder after the trainer
has saved it; resume only considers folders that carry the marker. In a multi-process run every rank writes
its own part of a checkpoint (its RNG state, its optimizer shard under DeepSpeed), so the marker waits for all
ranks and is written by the main process alone. (Which phases finished is ``run_outputs.RunState``.)
"""

from __future__ import annotations

import re
from pathlib import Path

from transformers import TrainerCallback

from ..atomic_io import write_json_atomic
from ..distributed import barrier, is_main_process

MARKER = "checkpoint_complete.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def latest_complete_checkpoint(directory: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` under ``directory`` that carries the completion marker."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    complete = [
        (int(match.group(1)), path)
        for path in directory.iterdir()
        if (match := _CHECKPOINT.match(path.name)) and (path / MARKER).is_file()
    ]
    return max(complete)[1] if complete else None


class CheckpointMarker(TrainerCallback):
    """Marks each checkpoint complete once the trainer has finished writing it."""

    def on_save(self, args, state, control, **kwargs):
        barrier()  # every rank has written its part (the trainer itself does not wait for the others)
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if is_main_process() and folder.is_dir():
            write_json_atomic(folder / MARKER, {"global_step": state.global_step})
