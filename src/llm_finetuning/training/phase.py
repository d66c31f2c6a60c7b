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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelError, TrainingInterrupted
from ..model import ModelManager
from ..model.hardware import free_memory, on_cuda
from . import trl_compat
from .arguments import trainer_settings
from .callbacks import GracefulStop, MetricsLogging, MetricsWriter
from .checkpoints import CheckpointMarker, latest_complete_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class PhaseResult:
    """What a finished phase reports to the run summary."""

    steps: int
    seconds: float
    resumed_from: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # the trainer's arguments as it used them


class TrainingPhase(ABC):
    """One training phase over the manager's model (the model outlives the phase; the trainer does not)."""

    name = "phase"
    settings_names: tuple[str, ...] = ()  # the trainer arguments recorded in the summary

    def __init__(self, manager: ModelManager, output_dir: Path, metrics: MetricsWriter | None,
                 callbacks: list[Any] | None = None) -> None:
        self.manager = manager
        self.output_dir = Path(output_dir)
        self.metrics = metrics
        self.callbacks = list(callbacks or [])
        self.trainer_ref: weakref.ref | None = None
        self.argument_overrides: dict[str, Any] = {}  # applied last to the TRL arguments (the preflight's probe)

    @abstractmethod
    def build_trainer(self) -> Any:
        """The TRL trainer for this phase, ready to train."""

    def run(self, resume: bool = False) -> PhaseResult:
        trl_compat.install()
        trainer = self.build_trainer()
        require_unsloth_trainer(trainer, self.manager.backend_name)
        settings = trainer_settings(trainer, self.settings_names)
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
        return PhaseResult(steps, round(time.perf_counter() - started, 2), str(checkpoint) if checkpoint else None,
                           settings)

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


def require_unsloth_trainer(trainer: Any, backend: str) -> None:
    """On CUDA the unsloth backend must train with Unsloth's compiled trainer, which Unsloth silently replaces
    by TRL's own when its patching fails (its warning scrolls by; the run would be slow and differently set)."""
    if backend != "unsloth" or not on_cuda():
        return  # without CUDA, Unsloth's CPU mode trains with TRL's trainers on purpose
    if not any(cls.__name__.startswith("Unsloth") for cls in type(trainer).__mro__):
        raise ModelError(
            f"the unsloth backend built TRL's own {type(trainer).__name__}: Unsloth could not patch it (see its "
            "warning above); reinstall the gpu extra (uv sync --extra gpu --reinstall) or set model.backend: hf"
        )


def release(trainer: Any) -> None:
    """Drop the trainer's references to optimizer, scheduler and data so they can be freed with it."""
    for attribute in ("optimizer", "lr_scheduler", "train_dataset", "eval_dataset", "callback_handler"):
        if hasattr(trainer, attribute):
            setattr(trainer, attribute, None)
    if getattr(trainer, "accelerator", None) is not None:
        trainer.accelerator.free_memory()
