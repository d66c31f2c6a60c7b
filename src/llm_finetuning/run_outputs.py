"""What a run leaves behind: ``summary.json``, ``metrics.jsonl``, ``plots/training.png`` and the final table.

``RunRecorder`` keeps the summary as the run goes and rewrites ``summary.json`` atomically after every stage,
so an interrupted run still shows what it measured, and ``--resume`` carries the evaluations of finished
phases into the final summary.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from .atomic_io import write_json_atomic
from .environment import device_description, package_versions

logger = logging.getLogger(__name__)

EVAL_KEYS = ("before_sft", "after_sft", "after_grpo")
TABLE_ROWS = (
    ("format accuracy", "format_accuracy"),
    ("answer accuracy (greedy)", "answer_accuracy"),
    ("answer accuracy (sampled)", "sampled_answer_accuracy"),
    ("reasoning present", "reasoning_present"),
    ("avg reasoning length", "avg_reasoning_length"),
    ("avg total reward", "avg_total_reward"),
)


class RunRecorder:
    """The run's summary, metrics file and plot."""

    def __init__(self, output_dir: Path, resume: bool) -> None:
        self.output_dir = output_dir
        self.summary_path = output_dir / "summary.json"
        self.metrics_path = output_dir / "metrics.jsonl"
        previous = _read_json(self.summary_path) if resume else {}
        if not resume and self.metrics_path.exists():
            self.metrics_path.unlink()  # a fresh run starts a fresh metrics file
        self.summary: dict[str, Any] = {
            "eval": {key: previous.get("eval", {}).get(key) for key in EVAL_KEYS},
            "phases": {
                phase: previous.get("phases", {}).get(phase) or {"steps": 0, "seconds": 0.0}
                for phase in ("sft", "grpo")
            },
            "save_path": previous.get("save_path"),
            "backend": None,
            "backend_reason": None,
            "device": device_description(),
            "versions": package_versions(),
            "seconds_total": 0.0,
            "complete": False,
        }

    def set(self, **values: Any) -> None:
        self.summary.update(values)
        self._write()

    def record_eval(self, key: str, figures: dict[str, Any]) -> None:
        self.summary["eval"][key] = figures
        self._write()

    def record_phase(self, phase: str, steps: int, seconds: float, **extra: Any) -> None:
        self.summary["phases"][phase] = {"steps": steps, "seconds": seconds, **extra}
        self._write()

    def finish(self, seconds_total: float, complete: bool) -> dict[str, Any]:
        self.summary["seconds_total"] = round(seconds_total, 2)
        self.summary["complete"] = complete
        self._write()
        try:
            from .plots import plot_training

            plot_training(self.metrics_path, self.output_dir / "plots" / "training.png")
        except Exception:  # a plot must never cost the user the run's results
            logger.exception("could not draw plots/training.png")
        return self.summary

    def print_table(self) -> None:
        print(format_table(self.summary))

    def _write(self) -> None:
        write_json_atomic(self.summary_path, self.summary)


def format_table(summary: dict[str, Any]) -> str:
    """The before/after table printed at the end of a run."""
    evals = summary["eval"]
    header = f"{'':<28}{'before SFT':>12}{'after SFT':>12}{'after GRPO':>12}"
    lines = [header, "-" * len(header)]
    for label, key in TABLE_ROWS:
        cells = [_cell(evals.get(stage), key) for stage in EVAL_KEYS]
        lines.append(f"{label:<28}" + "".join(f"{cell:>12}" for cell in cells))
    n = next((e["n"] for e in evals.values() if e), 0)
    lines.append(f"(held-out problems: {n}; adapter: {summary.get('save_path')})")
    return "\n".join(lines)


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
