"""The run's folder at its start and end: what is refused before anything is written, the files started fresh or
kept for ``--resume``, the processes recorded, and the summary, report and trackers' table when it ends (complete
or stopped)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..errors import PipelineError
from ..model import Backend
from ..model.adapters import check_replaceable
from ..reporting.report import write_report
from ..reporting.run_outputs import RunRecorder, format_table
from ..reporting.trackers import Trackers
from ..runtime.atomic_io import write_text_atomic
from ..runtime.distributed import process_record

__all__ = ["check_processes", "finish_outputs", "start_outputs"]

logger = logging.getLogger(__name__)


def start_outputs(config: PipelineConfig, output_dir: Path, *, sft: bool, grpo: bool, resume: bool) -> RunRecorder:
    """The resolved config, and the run's files started fresh or kept for ``--resume``; first, the adapters this
    run will save (``sft``, ``grpo``: whether those phases run) must not replace anything but an earlier save
    (refused now, not hours in)."""
    if sft:
        check_replaceable(config.sft_adapter_path)
    if grpo:
        check_replaceable(config.grpo_adapter_path)
    if config.expert_iteration.rounds > 0:
        check_replaceable(config.expert_iteration_adapter_path)
    write_text_atomic(output_dir / "config.yaml", config.to_yaml())
    return RunRecorder.start(output_dir, resume=resume)


def finish_outputs(recorder: RunRecorder, trackers: Trackers, seconds: float, complete: bool) -> dict[str, Any]:
    """The final summary.json and plot, then report.html of both (complete, stopped, or resumed to the end), and
    the before/after table to the trackers."""
    summary = recorder.finish(seconds, complete=complete)
    trackers.finish(format_table(summary))
    if recorder.writes:
        try:
            write_report(recorder.output_dir, summary)
        except Exception:  # a report must never cost the user the run's results
            logger.exception("could not write report.html")
    return summary


def check_processes(backend: Backend, recorder: RunRecorder, launch: Any) -> None:
    """Record how many processes the run has; refuse what cannot run in several."""
    processes = process_record(launch)
    before = (recorder.summary["processes"] or processes)["num_processes"]  # a resumed run: what it had before
    if before != processes["num_processes"]:
        logger.warning("this run was started with %d processes and resumes with %d: the data order changes",
                       before, processes["num_processes"])
    recorder.set(processes=processes)
    if processes["num_processes"] > 1 and not backend.several_processes:
        raise PipelineError(
            f"model.backend: the {backend.name} backend runs in one process; set model.backend=hf for a "
            "multi-process launch"
        )
