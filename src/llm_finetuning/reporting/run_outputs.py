"""What a run leaves behind: ``summary.json``, ``metrics.jsonl``, ``run_state.json``, the plot, table and report.

``RunRecorder`` keeps the summary as the run goes and rewrites ``summary.json`` atomically after every stage,
so an interrupted run still shows what it measured, and ``--resume`` carries the evaluations of finished
phases into the final summary. ``MetricsWriter`` appends every trainer log, evaluation and sample answer to
``metrics.jsonl``; ``RunState`` records which phases finished. At the end (complete or stopped) the recorder
draws ``plots/training.png``; ``report.py`` then makes ``report.html`` of the summary and the plot.
``RunRecorder.start`` is the one place that decides what a fresh run clears and what a resumed run keeps.

Every run has an id (``run_state.json``, ``summary.json``, and the marker of every checkpoint it writes), so
``--resume`` continues this run and never a checkpoint an earlier run left in the folder. A fresh run in a used
folder moves the previous run's checkpoints to ``previous_run/`` rather than deleting them (the user may have
meant ``--resume``) or refusing to start (running the demo twice is normal); the run before that one is
deleted then, so the folder holds at most one set of old checkpoints.

In a multi-process run every rank keeps the same summary in memory (evaluations are gathered to all ranks)
and takes the same decisions from it, but only the writer — the main process — touches the files.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from ..runtime.atomic_io import write_json_atomic
from ..runtime.environment import cpu_description, device_description, package_versions

logger = logging.getLogger(__name__)

EVAL_KEYS = ("before_sft", "after_sft", "after_expert_iteration", "after_grpo")
OPTIONAL_STAGES = ("after_expert_iteration",)  # shown only in a run that has them
PREVIOUS_RUN = "previous_run"  # a fresh run's predecessor's checkpoints, set aside
CHECKPOINT_FOLDERS = ("sft", "grpo")  # where the phases write checkpoint-N
TABLE_ROWS = (
    ("format accuracy", "format_accuracy"),
    ("answer accuracy (greedy)", "answer_accuracy"),
    ("answer accuracy (sampled)", "sampled_answer_accuracy"),
    ("reasoning present", "reasoning_present"),
    ("avg reasoning length", "avg_reasoning_length"),
    ("avg total reward", "avg_total_reward"),
)


class RunRecorder:
    """The run's summary, metrics file, run state and plot."""

    def __init__(self, output_dir: Path, previous: dict[str, Any], writes: bool = True) -> None:
        self.output_dir, self.writes = output_dir, writes
        self.summary_path = output_dir / "summary.json"
        self.metrics = MetricsWriter(output_dir / "metrics.jsonl", enabled=writes)
        self.state = RunState(output_dir, writes=writes)
        self.run_id = self.state.run_id  # what this run's checkpoints are marked with
        self.summary: dict[str, Any] = {
            "run_id": self.run_id,
            "eval": {key: previous.get("eval", {}).get(key) for key in shown_stages(previous)},
            # the greedy answers to the first evaluation.sample_answers problems, per stage
            "samples": {key: (previous.get("samples") or {}).get(key) for key in shown_stages(previous)},
            "phases": {  # expert iteration's once it ran
                **previous.get("phases", {}),
                **{phase: previous.get("phases", {}).get(phase) or {"steps": 0, "seconds": 0.0}
                   for phase in ("sft", "grpo")},
            },
            "save_path": previous.get("save_path"),
            "backend": None,
            "backend_reason": None,
            "precision": None,  # the weights' dtype and the autocast training used, and why
            "rollouts": None,  # what GRPO generated its completions with, and why
            "importance_sampling": None,  # GRPO's correction for the vLLM engine's probabilities, and why
            "reference": None,  # what GRPO's KL term (beta) anchors the policy to, and why
            "sandbox": None,  # the kernel layers the verifier and reward workers run under (sandbox/confine.py)
            "chat_template": None,  # whose chat template lays out the turns (prompt.template_source), and why
            "grpo_problems": previous.get("grpo_problems"),  # grpo_training.difficulty_band: how problems were kept
            "processes": previous.get("processes"),  # num_processes, launcher, zero_stage: set when the run starts
            "memory": None,  # each part's peak resident memory, this process and its children (runtime/peak_memory)
            "device": device_description(),
            "cpu": cpu_description(),  # model, kernel flags, torch's vector capability, threads
            "versions": package_versions(),
            "seconds_total": 0.0,
            "complete": False,
        }

    @classmethod
    def start(cls, output_dir: Path, resume: bool, writes: bool = True) -> RunRecorder:
        """A resumed run keeps the summary, metrics and run state it had; a fresh run starts all three anew.

        ``writes`` is False on every rank but the main process of a multi-process run: those only read.
        """
        if resume:
            if writes:
                MetricsWriter(output_dir / "metrics.jsonl").repair()
            return cls(output_dir, _read_json(output_dir / "summary.json"), writes)
        if writes:
            _set_aside_checkpoints(output_dir)
            (output_dir / "metrics.jsonl").unlink(missing_ok=True)
            RunState(output_dir).clear(run_id=uuid.uuid4().hex[:12])
        return cls(output_dir, {}, writes)

    def has_eval(self, key: str) -> bool:
        return bool(self.summary["eval"].get(key))

    def set(self, **values: Any) -> None:
        self.summary.update(values)
        self._write()

    def record_eval(self, key: str, figures: dict[str, Any], samples: list[dict[str, Any]] | None = None,
                    ) -> None:  # fmt: skip
        self.summary["eval"][key] = figures
        self.summary["samples"][key] = samples
        self._write()

    def record_samples(self, stage: str, step: int, samples: list[dict[str, Any]]) -> None:
        """One metrics.jsonl record per sample answer (phase ``sample``), its rewards as ``rewards/<name>``."""
        for sample in samples:
            rewards = {f"rewards/{name}": value for name, value in sample["rewards"].items()}
            fields = {key: value for key, value in sample.items() if key != "rewards"}
            self.metrics.write("sample", step, {"stage": stage, **fields, **rewards})

    def record_phase(self, phase: str, result: Any) -> None:
        """A finished phase's steps and seconds (a ``training.phase.PhaseResult``), where it resumed from, the
        trainer settings it used, and in a multi-process run each rank's weights checksum (equal while the
        replicas are in sync)."""
        extra = {"resumed_from": result.resumed_from} if result.resumed_from else {}
        if result.weight_checksums is not None:
            extra["weight_checksums"] = result.weight_checksums
        self.summary["phases"][phase] = {"steps": result.steps, "seconds": result.seconds, **extra,
                                         "settings": result.settings}
        self._write()

    def record_skipped(self, phase: str) -> None:
        self.summary["phases"][phase] = {"steps": 0, "seconds": 0.0, "skipped": True}
        self._write()

    def finish(self, seconds_total: float, complete: bool) -> dict[str, Any]:
        self.summary["seconds_total"] = round(seconds_total, 2)
        self.summary["complete"] = complete
        self._write()
        if not self.writes:
            return self.summary
        try:
            from .plots import plot_training

            plot_training(self.metrics.path, self.output_dir / "plots" / "training.png")
        except Exception:  # a plot must never cost the user the run's results
            logger.exception("could not draw plots/training.png")
        return self.summary

    def print_table(self) -> None:
        print(format_table(self.summary))

    def _write(self) -> None:
        if self.writes:
            write_json_atomic(self.summary_path, self.summary)


class MetricsWriter:
    """Appends one JSON object per record to ``metrics.jsonl`` (phase, step, time and the values).

    A disabled writer (``enabled=False``: a rank other than the main process) drops every record.
    """

    def __init__(self, path: str | Path, enabled: bool = True) -> None:
        self.path, self.enabled = Path(path), enabled
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def repair(self) -> None:
        """Drop a last line cut short by a crash mid-append (everything after it would be unreadable)."""
        try:
            with open(self.path, "rb+") as handle:
                data = handle.read()
                if data and not data.endswith(b"\n"):
                    handle.truncate(data.rfind(b"\n") + 1)
                    logger.warning("%s: dropped a last line cut short by the interrupted run", self.path.name)
        except FileNotFoundError:
            return

    def write(self, phase: str, step: int, values: dict[str, Any]) -> None:
        if not self.enabled:
            return
        clean = {k: v for k, v in values.items() if isinstance(v, (int, float, str, bool)) and _finite(v)}
        record = {"phase": phase, "step": step, "time": round(time.time(), 3), **clean}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


class RunState:
    """Which phases of a run in ``output_dir`` have finished (``run_state.json``, written atomically)."""

    def __init__(self, output_dir: str | Path, writes: bool = True) -> None:
        self.path, self.writes = Path(output_dir) / "run_state.json", writes

    def load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    @property
    def run_id(self) -> str | None:
        """The id of the run this folder holds (None: a run from before ids, or none yet)."""
        return self.load().get("run_id")

    def is_done(self, phase: str) -> bool:
        return self.load().get(phase, {}).get("done", False)

    def mark_done(self, phase: str, **details: Any) -> None:
        self._mark(phase, done=True, details=details)

    def mark_progress(self, phase: str, **details: Any) -> None:
        """What an unfinished phase has done so far (``is_done`` stays false)."""
        self._mark(phase, done=False, details=details)

    def _mark(self, phase: str, done: bool, details: dict[str, Any]) -> None:
        if not self.writes:
            return
        state = self.load()
        state[phase] = {"done": done, **details}
        write_json_atomic(self.path, state)

    def clear(self, run_id: str) -> None:
        """Forget every finished phase: a fresh run, ``run_id``."""
        write_json_atomic(self.path, {"run_id": run_id})


def _set_aside_checkpoints(output_dir: Path) -> None:
    """Move an earlier run's ``checkpoint-N`` folders to ``previous_run/`` (see the module docstring)."""
    found = [p for folder in CHECKPOINT_FOLDERS if (output_dir / folder).is_dir()
             for p in sorted((output_dir / folder).glob("checkpoint-*")) if p.is_dir()]  # fmt: skip
    if not found:
        return
    previous = output_dir / PREVIOUS_RUN
    shutil.rmtree(previous, ignore_errors=True)
    for checkpoint in found:
        target = previous / checkpoint.parent.name / checkpoint.name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(checkpoint, target)
    logger.info("a fresh run: the previous run's %d checkpoints are now in %s (--resume continues a run; delete "
                "that folder when you no longer need them)", len(found), previous)  # fmt: skip


def shown_stages(summary: dict[str, Any]) -> list[str]:
    """The stages a summary has keys for and the before/after table a column for: every one, but an optional one
    only where it was evaluated."""
    evals = summary.get("eval") or {}
    return [stage for stage in EVAL_KEYS if stage not in OPTIONAL_STAGES or evals.get(stage)]


def table_rows(summary: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The before/after table's rows: a label and one cell per shown stage; the console and the report print the
    same cells."""
    evals, stages = summary["eval"], shown_stages(summary)
    return [(label, [_cell(evals.get(stage), key) for stage in stages]) for label, key in TABLE_ROWS]


STAGE_NAMES = {"before_sft": "before SFT", "after_sft": "after SFT", "after_expert_iteration": "after EI",
               "after_grpo": "after GRPO"}  # fmt: skip  (EI: expert iteration)


def held_out_count(summary: dict[str, Any]) -> int:
    return next((e["n"] for e in summary["eval"].values() if e), 0)


def format_table(summary: dict[str, Any]) -> str:
    """The before/after table printed at the end of a run."""
    header = f"{'':<28}" + "".join(f"{STAGE_NAMES[stage]:>12}" for stage in shown_stages(summary))
    lines = [header, "-" * len(header)]
    for label, cells in table_rows(summary):
        lines.append(f"{label:<28}" + "".join(f"{cell:>12}" for cell in cells))
    lines.append(f"(held-out problems: {held_out_count(summary)}; adapter: {summary.get('save_path')})")
    if peaks := (summary.get("memory") or {}).get("peak_rss_gib"):
        parts = ", ".join(f"{PART_NAMES.get(part, part)} {gib:.1f}" for part, gib in peaks.items())
        lines.append(f"(peak memory in GiB, this process and its children: {parts})")
    return "\n".join(lines)


PART_NAMES = {"load": "loading", "sft": "SFT", "expert_iteration": "expert iteration", "grpo": "GRPO",
              "evaluation": "evaluations"}  # fmt: skip


def _cell(figures: dict[str, Any] | None, key: str) -> str:
    if not figures:
        return "-"
    value = figures[key]
    if value is None:
        return "-"
    return f"{value:.1f}" if key == "avg_reasoning_length" or key == "avg_total_reward" else f"{value:.3f}"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
