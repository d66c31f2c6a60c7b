"""What SFT and GRPO share: build a TRL trainer, train (resuming if asked), stop cleanly on signals.

A phase subclass only says how to build its trainer; everything else — checkpoint markers, metrics, signal
handling, resume from the newest complete checkpoint, dropping the trainer afterwards so its optimizer
and dataloaders can be freed — happens here, once.
"""

from __future__ import annotations

import logging
import time
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TrainingInterrupted
from ..model import ModelManager
from ..model.hardware import free_memory
from . import trl_compat
from .callbacks import GracefulStop, MetricsLogging, MetricsWriter
from .checkpoints import CheckpointMarker, latest_complete_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class PhaseResult:
    """What a finished phase reports to the run summary."""

    steps: int
    seconds: float
    resumed_from: str | None = None


class TrainingPhase(ABC):
    """One training phase over the manager's model (the model outlives the phase; the trainer does not)."""

    name = "phase"

    def __init__(self, manager: ModelManager, output_dir: Path, metrics: MetricsWriter,
                 callbacks: list[Any] | None = None) -> None:
        self.manager = manager
        self.output_dir = Path(output_dir)
        self.metrics = metrics
        self.callbacks = list(callbacks or [])
        self.trainer_ref: weakref.ref | None = None

    @abstractmethod
    def build_trainer(self) -> Any:
        """The TRL trainer for this phase, ready to train."""

    def run(self, resume: bool = False) -> PhaseResult:
        trl_compat.install()
        trainer = self.build_trainer()
        self.trainer_ref = weakref.ref(trainer)
        stop = GracefulStop()
        for callback in (CheckpointMarker(), MetricsLogging(self.metrics, self.name), stop, *self.callbacks):
            trainer.add_callback(callback)
        checkpoint = self._checkpoint_to_resume(resume)
        started = time.perf_counter()
        stop.install()
        try:
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        finally:
            stop.restore()
        steps = trainer.state.global_step
        release(trainer)
        del trainer
        free_memory()
        if stop.received is not None:
            raise TrainingInterrupted(
                f"{self.name} stopped at step {steps}; a checkpoint was saved in {self.output_dir}"
            )
        return PhaseResult(steps, round(time.perf_counter() - started, 2), str(checkpoint) if checkpoint else None)

    def _checkpoint_to_resume(self, resume: bool) -> Path | None:
        checkpoint = latest_complete_checkpoint(self.output_dir)
        if resume and checkpoint:
            logger.info("%s: resuming from %s", self.name, checkpoint)
            return checkpoint
        if resume:
            logger.info("%s: no complete checkpoint in %s; starting from step 0", self.name, self.output_dir)
        elif checkpoint:
            logger.warning("%s: starting over; older checkpoints in %s will be replaced (use --resume to continue)",
                           self.name, self.output_dir)
        return None


def release(trainer: Any) -> None:
    """Drop the trainer's references to optimizer, scheduler and data so they can be freed with it."""
    for attribute in ("optimizer", "lr_scheduler", "train_dataset", "eval_dataset", "callback_handler"):
        if hasattr(trainer, attribute):
            setattr(trainer, attribute, None)
    if getattr(trainer, "accelerator", None) is not None:
        trainer.accelerator.free_memory()
