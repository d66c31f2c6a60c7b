"""Experiment trackers: the trainers' own logs, plus what the trainers never see — every evaluation, the sample
answers and the before/after table — in each tracker ``report_to`` names.

``report_to`` takes anything transformers reports to (``TRACKERS``); the trainers log their steps there
themselves. TensorBoard, Weights & Biases and Trackio also get the run's evaluations (before SFT, after SFT, during
and after GRPO: every figure, and accuracy per difficulty), the sample answers of each stage as text, and the
before/after table at the end, under the run's ``run_name`` and ``project``. TensorBoard writes them to
``<output_dir>/runs/evaluations``; W&B and Trackio log to the run the pipeline starts (the trainers' callbacks
then join it rather than starting their own). A tracker that is not installed is refused when the run starts,
naming the package to install (the ``tracking`` extra has all three). Only the main process of a
multi-process run reports.

    trackers = Trackers.start(config, output_dir)      # pipeline.run; no-op for report_to: none
    trackers.evaluation("after_sft", 0, figures, samples)
    trackers.finish(summary)
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

from ..errors import PipelineError

__all__ = ["OURS", "TRACKERS", "Trackers"]

logger = logging.getLogger(__name__)

# what transformers reports to (its INTEGRATION_TO_CALLBACK), and the package each needs
TRACKERS = {"azure_ml": "azureml", "comet_ml": "comet_ml", "mlflow": "mlflow", "neptune": "neptune",
            "tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb", "codecarbon": "codecarbon",
            "clearml": "clearml", "dagshub": "dagshub", "flyte": "flytekit", "dvclive": "dvclive",
            "swanlab": "swanlab", "kubeflow": "kubeflow"}  # fmt: skip
OURS = ("tensorboard", "wandb", "trackio")  # the trackers the evaluations go to as well


class Trackers:
    """The run's trackers, started once; every method is a no-op for a tracker not asked for."""

    def __init__(self, writers: dict[str, Any]) -> None:
        self.writers = writers

    @classmethod
    def start(cls, config: Any, output_dir: Path, writes: bool = True) -> Trackers:
        names = [name for name in config.report_to if name in OURS] if writes else []
        for name in config.report_to:
            if importlib.util.find_spec(TRACKERS[name]) is None:
                raise PipelineError(f"report_to: {name} needs the {TRACKERS[name]} package; install it (uv sync "
                                    "--extra tracking has tensorboard, wandb and trackio) or drop it from report_to")  # fmt: skip
        os.environ.setdefault("WANDB_PROJECT", config.project)  # the trainers' callbacks join this project
        os.environ.setdefault("TRACKIO_PROJECT", config.project)
        writers = {name: _STARTERS[name](config, output_dir) for name in names}
        return cls(writers)

    def evaluation(self, stage: str, step: int, figures: dict[str, Any], samples: list[dict[str, Any]]) -> None:
        """One evaluation's figures (and, for a stage evaluation, its sample answers)."""
        scalars = _scalars(stage, figures)
        text = _samples_text(samples)
        for name, writer in self.writers.items():
            try:
                _LOGGERS[name](writer, scalars, step, f"samples/{stage}", text)
            except Exception:  # a tracker must never cost the run
                logger.exception("could not log %s to %s", stage, name)

    def finish(self, table: str) -> None:
        """The before/after table, then close what the pipeline started."""
        for name, writer in self.writers.items():
            try:
                _LOGGERS[name](writer, {}, 0, "before_after", table)
                _FINISHERS[name](writer)
            except Exception:
                logger.exception("could not finish %s", name)
        self.writers = {}


def _scalars(stage: str, figures: dict[str, Any]) -> dict[str, float]:
    scalars = {f"eval/{stage}/{key}": value for key, value in figures.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}  # fmt: skip
    for setting, values in (figures.get("by_difficulty") or {}).items():
        for value, cell in values.items():
            scalars[f"eval/{stage}/answer_accuracy/{setting}={value}"] = cell["answer_accuracy"]
    return scalars


def _samples_text(samples: list[dict[str, Any]]) -> str:
    return "\n\n".join(f"**{s['question']}**\n\n    {s['completion']}\n\nanswer {s['answer']} (gold {s['gold']}): "
                       f"{'right' if s['correct'] else 'wrong'}" for s in samples)  # fmt: skip


def _tensorboard(config: Any, output_dir: Path) -> Any:
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(output_dir / "runs" / "evaluations"))


def _tensorboard_log(writer: Any, scalars: dict[str, float], step: int, tag: str, text: str) -> None:
    for key, value in scalars.items():
        writer.add_scalar(key, value, step)
    if text:
        writer.add_text(tag, text, step)
    writer.flush()


def _wandb(config: Any, output_dir: Path) -> Any:
    import wandb

    return wandb.init(project=config.project, name=config.tracker_run_name, dir=str(output_dir), config=config.to_dict(),
                      reinit="finish_previous")  # fmt: skip


def _wandb_log(run: Any, scalars: dict[str, float], step: int, tag: str, text: str) -> None:
    run.log({**scalars, **({tag: text} if text else {})})


def _trackio(config: Any, output_dir: Path) -> Any:
    import trackio

    return trackio.init(project=config.project, name=config.tracker_run_name, config=config.to_dict())


def _trackio_log(run: Any, scalars: dict[str, float], step: int, tag: str, text: str) -> None:
    import trackio

    trackio.log({**scalars, **({tag: text} if text else {})})


_STARTERS = {"tensorboard": _tensorboard, "wandb": _wandb, "trackio": _trackio}
_LOGGERS = {"tensorboard": _tensorboard_log, "wandb": _wandb_log, "trackio": _trackio_log}
_FINISHERS = {"tensorboard": lambda writer: writer.close(), "wandb": lambda run: run.finish(),
              "trackio": lambda run: __import__("trackio").finish()}  # fmt: skip
