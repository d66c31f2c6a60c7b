"""Draw ``plots/training.png`` from ``metrics.jsonl``: one glance at whether the model got better.

Panels: SFT loss; GRPO mean reward with each reward component; format and answer accuracy of the evaluations
(before SFT, after SFT = GRPO step 0, every evaluation.grpo_every_steps, after GRPO); and the GRPO health signals users
watch — the share of groups with zero reward variance (no learning signal), clipped completions, length.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on training machines
import matplotlib.pyplot as plt


def read_metrics(path: Path) -> list[dict]:
    """The records of ``metrics.jsonl``; a line that does not parse (cut short by a crash) is skipped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "phase" in record and "step" in record:
            records.append(record)
    return records


def _series(records: list[dict], phase: str, key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in records if r["phase"] == phase and key in r]
    return [p[0] for p in points], [p[1] for p in points]


def plot_training(metrics_path: Path, out_path: Path) -> Path:
    records = read_metrics(metrics_path)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    (loss_ax, reward_ax), (eval_ax, health_ax) = axes

    loss_ax.plot(*_series(records, "sft", "loss"), label="SFT loss")
    loss_ax.set(title="SFT loss", xlabel="step")

    reward_ax.plot(*_series(records, "grpo", "reward"), label="total", linewidth=2)
    components = sorted({k for r in records if r["phase"] == "grpo" for k in r if k.startswith("rewards/")
                         and k.endswith("/mean")})
    for key in components:
        reward_ax.plot(*_series(records, "grpo", key), label=key.split("/")[1], alpha=0.7)
    reward_ax.set(title="GRPO reward", xlabel="GRPO step")

    evals = defaultdict(list)
    for record in (r for r in records if r["phase"] == "eval"):
        for key in ("format_accuracy", "answer_accuracy", "sampled_answer_accuracy"):
            if record.get(key) is not None:  # periodic evaluations have no sampled figure
                evals[key].append((record["step"], record[key]))
    for key, points in evals.items():
        eval_ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=key)
    eval_ax.set(title="held-out evaluation (step 0 = after SFT)", xlabel="GRPO step", ylim=(0, 1.05))

    for key, label in (("frac_reward_zero_std", "groups with zero reward std"),
                       ("completions/clipped_ratio", "clipped completions")):
        health_ax.plot(*_series(records, "grpo", key), label=label)
    health_ax.set(title="GRPO learning signal", xlabel="GRPO step", ylim=(0, 1.05))

    for ax in axes.flat:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=100)
    plt.close(fig)
    return out_path
