"""The offline demo against its acceptance figures: wall time, peak memory and what the model learned.

    uv run python benchmarks/tiny_demo.py [--output-dir outputs/tiny_bench] [--runs 2] [-- extra run_training args]

Runs ``run_training.py --config configs/tiny.yaml`` as a child process (a fresh output dir each run, so
the tiny base model is built too), takes the wall time and the child's peak RSS, reads ``summary.json``
and prints each figure next to its target. With ``--runs 2`` the second run checks that
the same seed gives the same summary numbers.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("before_sft", "after_sft", "after_grpo")
FIGURES = ("format_accuracy", "answer_accuracy", "sampled_answer_accuracy")


def run_once(output_dir: Path, extra: list[str]) -> tuple[float, float, dict]:
    shutil.rmtree(output_dir, ignore_errors=True)
    command = [sys.executable, "run_training.py", "--config", "configs/tiny.yaml", "--output-dir", str(output_dir),
               *extra]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - started
    # ru_maxrss of RUSAGE_CHILDREN is the largest peak among finished children (KiB on Linux)
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return seconds, peak_gib, json.loads((output_dir / "summary.json").read_text())


def checks(seconds: float, peak_gib: float, summary: dict) -> list[tuple[str, str, bool]]:
    ev = summary["eval"]
    sft, grpo = ev["after_sft"], ev["after_grpo"]
    sampled_gain = 100 * (grpo["sampled_answer_accuracy"] - sft["sampled_answer_accuracy"])
    greedy_change = 100 * (grpo["answer_accuracy"] - sft["answer_accuracy"])
    return [
        ("wall time", f"{seconds:.0f} s (<= 300)", seconds <= 300),
        ("peak RSS", f"{peak_gib:.2f} GiB (<= 3)", peak_gib <= 3),
        ("held-out problems", f"{sft['n']} (>= 200)", sft["n"] >= 200),
        ("format after SFT", f"{sft['format_accuracy']:.3f} (>= 0.95; before {ev['before_sft']['format_accuracy']:.3f})",
         sft["format_accuracy"] >= 0.95),
        ("sampled accuracy gain", f"{sampled_gain:+.1f} pts (>= +10)", sampled_gain >= 10),
        ("greedy accuracy change", f"{greedy_change:+.1f} pts (>= -2)", greedy_change >= -2),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "outputs" / "tiny_bench")
    parser.add_argument("--runs", type=int, default=1, help="2 also checks that the same seed repeats")
    parser.add_argument("extra", nargs="*", help="extra run_training.py arguments (after --)")
    args = parser.parse_args()
    summaries = []
    for index in range(args.runs):
        seconds, peak_gib, summary = run_once(args.output_dir, args.extra)
        summaries.append(summary)
        print(f"\nrun {index + 1}: {'stage':<12}" + "".join(f"{name:>26}" for name in FIGURES))
        for stage in STAGES:
            print(f"       {stage:<12}" + "".join(f"{summary['eval'][stage][name]:>26.3f}" for name in FIGURES))
        print(f"       phases: sft {summary['phases']['sft']['seconds']:.0f} s, "
              f"grpo {summary['phases']['grpo']['seconds']:.0f} s")
        for name, value, ok in checks(seconds, peak_gib, summary):
            print(f"       {'PASS' if ok else 'MISS'}  {name:<24} {value}")
    if len(summaries) > 1:
        same = all(s["eval"] == summaries[0]["eval"] for s in summaries[1:])
        print(f"\nsame seed, same summary numbers: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
