"""What SFT and GRPO share: build a TRL trainer, train (resuming if asked), stop cleanly on signals.

A phase subclass only says how to build its trainer; everything else — checkpoint markers, metrics, the
progress view in place of the trainer's own bar and printed logs, signal handling, resume from the newest
complete checkpoint, dropping the trainer afterwards so its optimizer and dataloaders can be freed — happens
here, once. In a multi-process run every rank runs the phase; at its end each rank reports a checksum of its
weights, so a run can show its replicas stayed identical.
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TrainingInterrupted
from ..model import ModelManager
from ..model.hardware import free_memory
from ..runtime.distributed import (
    barrier,
    full_weights,
    gather_objects,
    run_on_main,
    weights_checksum,
    world_size,
)
from . import trl_compat
from .arguments import trainer_settings
from .callbacks import GracefulStop, MetricsLogging, MetricsWriter, TrainingProgress
from .checkpoints import CheckpointMarker, checkpoint_step, latest_complete_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class PhaseResult:
    """What a finished phase reports to the run summary."""

    steps: int
    seconds: float
    resumed_from: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # the trainer's arguments as it used them
    weight_checksums: list[str | None] | None = None  # one per rank in a multi-process run, else None


class TrainingPhase(ABC):
    """One training phase over the manager's model (the model outlives the phase; the trainer does not)."""

    name = "phase"
    title = "phase"  # what the console calls it
    settings_names: tuple[str, ...] = ()  # the trainer arguments recorded in the summary
    passed_through: tuple[str, ...] = ()  # the section's further TRL fields, recorded too
    section = ""  # the config section of this phase's settings

    def __init__(self, manager: ModelManager, output_dir: Path, metrics: MetricsWriter | None,
                 callbacks: list[Any] | None = None) -> None:  # fmt: skip
        self.manager = manager
        self.output_dir = Path(output_dir)
        self.metrics = metrics
        self.callbacks = list(callbacks or [])
        self.trainer_ref: weakref.ref | None = None
        self.argument_overrides: dict[str, Any] = {}  # applied last to the TRL arguments (the preflight's probe)
        self.answer_rewards: dict[str, float] = {}  # name -> weight of the rewards that score the answer

    @abstractmethod
    def build_trainer(self) -> Any:
        """The TRL trainer for this phase, ready to train."""

    def run(self, resume: bool = False, run_id: str | None = None) -> PhaseResult:
        """Train; with ``resume``, from the newest complete checkpoint of the run ``run_id``."""
        trl_compat.install(self.plan.cuda)
        backend, phase_setting = self.manager.backend, getattr(self.config, self.section).gradient_checkpointing
        backend.checkpoint_activations(self.manager.model, backend.trainer_checkpointing(self.config.model, phase_setting))
        trainer = self.build_trainer()
        self.manager.backend.check_trainer(trainer)
        self.started()
        settings = trainer_settings(trainer, self.settings_names, self.passed_through)
        self.trainer_ref = weakref.ref(trainer)
        stop = GracefulStop()
        progress = TrainingProgress(self.title, self.name, self.answer_rewards)
        TrainingProgress.take_over(trainer)
        logging = [MetricsLogging(self.metrics, self.name)] if self.metrics is not None else []  # none: no file
        for callback in (CheckpointMarker(run_id), *logging, stop, progress, *self.callbacks):
            trainer.add_callback(callback)
        checkpoint = self._checkpoint_to_resume(resume, run_id)
        started = time.perf_counter()
        finished_at = checkpoint_step(checkpoint) if checkpoint else 0
        if checkpoint and 0 < trainer.args.max_steps <= finished_at:  # killed after its last checkpoint: its weights
            logger.info("%s: all %d steps were done before the interruption", self.name, finished_at)
            trainer._load_from_checkpoint(str(checkpoint))  # train() would take one more step from there
            steps = finished_at
        else:
            stop.install()
            try:
                trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
            finally:
                stop.restore()
                progress.close()
            steps = trainer.state.global_step
        checksums = gather_objects(weights_checksum(self.manager.model)) if world_size() > 1 else None
        checksums = checksums if checksums and None not in checksums else None  # ZeRO-3: no replicas to compare
        release(trainer)
        del trainer
        free_memory()
        if stop.received is not None:
            raise TrainingInterrupted(
                f"{self.name} stopped at step {steps}; a checkpoint was saved in {self.output_dir}"
            )
        if checksums and len(set(checksums)) > 1:
            logger.error("%s: the ranks' weights differ after training (checksums %s)", self.name, checksums)
        return PhaseResult(steps, round(time.perf_counter() - started, 2), str(checkpoint) if checkpoint else None,
                           settings, checksums)

    def started(self) -> None:
        """Once the trainer is built (its engine started), before its first step; untimed."""

    @contextlib.contextmanager
    def model_for_generation(self) -> Iterator[Any]:
        """The model to generate from while the trainer lives: under ZeRO-3 its gathered weights, as TRL does."""
        trainer = self.trainer_ref() if self.trainer_ref else None
        if trainer is None:
            yield self.manager.model
            return
        from trl.models.utils import unwrap_model_for_generation

        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            yield model

    def _checkpoint_to_resume(self, resume: bool, run_id: str | None) -> Path | None:
        checkpoint = latest_complete_checkpoint(self.output_dir, run_id) if resume else None
        if checkpoint:
            logger.info("%s: resuming from %s", self.name, checkpoint)
        elif resume:
            logger.info("%s: no complete checkpoint of this run in %s; starting from step 0", self.name,
                        self.output_dir)  # fmt: skip
        return checkpoint


def save_weights(manager: ModelManager, path: Path) -> None:
    """The main process saves the whole weights (gathered under ZeRO-3); the others wait until it has."""
    with full_weights(manager.model):
        run_on_main(lambda: manager.save_adapter(path))
    barrier()


def load_weights(manager: ModelManager, path: Path) -> None:
    """A saved adapter into the model, on every rank (under ZeRO-3 into its gathered weights)."""
    with full_weights(manager.model, modifier_rank=0):
        manager.load_adapter(path)


def release(trainer: Any) -> None:
    """Drop the trainer's references to optimizer, scheduler and data so they can be freed with it."""
    for attribute in ("optimizer", "lr_scheduler", "train_dataset", "eval_dataset", "callback_handler"):
        if hasattr(trainer, attribute):
            setattr(trainer, attribute, None)
    if getattr(trainer, "accelerator", None) is not None:
        trainer.accelerator.free_memory()
