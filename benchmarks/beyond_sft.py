"""Beyond a converged SFT model: three ways to spend the same extra training time, scored on harder problems that
come with final answers only and on SFT's own problems (what is forgotten).

    uv run --extra real-model python benchmarks/beyond_sft.py --config configs/smollm2_answer_only.yaml \\
        --seed 0 --output-dir outputs/beyond_sft [--arms more_sft,expert_iteration,grpo,...] [--set KEY=VALUE ...]

1. ``sft``: the config's SFT alone (``--skip-grpo``), into ``<output-dir>/seed<N>/sft``; kept when its adapter
   is there already.
2. Each arm from that adapter, in a folder of its own, its evaluations off (step 3 scores every adapter alike):
   ``more_sft`` (SFT continued on the worked-solution data: ``sft_training.init_adapter``), ``expert_iteration``,
   ``grpo`` (on the config's GRPO data: answer-only) and ``expert_iteration_grpo`` (half the rounds, then half
   the GRPO steps from that adapter). How much each trains is set by ``ARM_SETTINGS``,
   sized so the arms' training takes about the same time on a 2-core machine; the seconds each took are recorded
   beside its figures, so an unequal budget shows.
3. Every adapter scored in one child process (the model loaded once) on ``PROBLEM_SETS``: greedy, and for the
   harder set ``SAMPLES`` samples per problem (avg@k, pass@k), by number of terms and digits. The problems come
   from another data seed than training's (``EVAL_SEED_OFFSET``).

Prints and writes ``<output-dir>/seed<N>/results.json``: per adapter its training seconds and per problem set its
figures, with the commit, machine and command. ``table`` prints the markdown table of every ``seed*/results.json``
under ``--output-dir``: each figure's mean and standard error over the seeds, and GRPO's margins seed by seed:

    uv run python benchmarks/beyond_sft.py table --output-dir outputs/beyond_sft
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = 8
EVAL_SEED_OFFSET = 1000  # the scored problems' data seed: seed + this, never a training seed of this harness

# What each arm sets over the config (beyond output folder and seed; --set comes after these), and what it saves:
# sized so that each trains about 10 minutes on a 2-core bf16 machine (measured: an SFT step 1.8 s, an expert
# iteration round of 64 problems x 8 samples 50 s, a GRPO step of 3-5 terms 14 s).
ARM_SETTINGS: dict[str, dict[str, Any]] = {
    "more_sft": {"flags": ["--skip-grpo"], "set": ["sft_training.max_steps=330", "sft_training.warmup_steps=0"],
                 "adapter": "sft/final", "phases": ["sft"]},
    "expert_iteration": {"flags": ["--skip-sft", "--skip-grpo"], "set": ["expert_iteration.rounds=12"],
                         "adapter": "expert_iteration/final", "phases": ["expert_iteration"]},
    "grpo": {"flags": ["--skip-sft"], "set": ["grpo_training.max_steps=40"], "adapter": "grpo_saved_lora",
             "phases": ["grpo"]},
    # half of each: expert iteration's rounds, then GRPO from its adapter
    "expert_iteration_grpo": {"flags": ["--skip-sft"], "set": ["expert_iteration.rounds=6", "grpo_training.max_steps=20"],
                              "adapter": "grpo_saved_lora", "phases": ["expert_iteration", "grpo"]},
}  # fmt: skip
# --quick: every arm and the base SFT a few steps, a few problems scored: the harness checked end to end in minutes.
QUICK = ["sft_training.max_steps=3", "expert_iteration.problems_per_round=4", "grpo_training.max_steps=1",
         "data.reasoning_gym.num_train=200"]  # fmt: skip

# Scored problem sets: chain_sum settings (over the config's), how many problems, whether samples are drawn.
PROBLEM_SETS: dict[str, dict[str, Any]] = {
    "harder (3-5 terms)": {"settings": {"min_terms": 3, "max_terms": 5, "min_digits": 1, "max_digits": 2},
                           "n": 400, "sampled": True},
    "sft's (2-3 terms)": {"settings": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
                          "n": 400, "sampled": False},
    "3 digits (2-4 terms)": {"settings": {"min_terms": 2, "max_terms": 4, "min_digits": 3, "max_digits": 3},
                             "n": 200, "sampled": False},
}  # fmt: skip


def run_training(config: Path, output_dir: Path, seed: int, flags: list[str], sets: list[str]) -> float:
    """``run_training.py`` in a child process; its wall seconds. Raises on failure."""
    command = [sys.executable, str(ROOT / "run_training.py"), "--config", str(config), "--output-dir",
               str(output_dir), *flags]  # fmt: skip
    for item in [f"seed={seed}", *sets]:
        command += ["--set", item]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True)
    return round(time.perf_counter() - started, 1)


def train_arms(config: Path, root: Path, seed: int, arms: list[str], extra: list[str],
               quick: bool) -> dict[str, Any]:  # fmt: skip
    """The converged SFT adapter (made once), then each arm from it; per adapter: folder, wall and phase seconds."""
    trained: dict[str, Any] = {}
    base = root / "sft"
    if not (base / "sft" / "final").is_dir():
        wall = run_training(config, base, seed, ["--skip-grpo"],
                            [*extra, "evaluation.enabled=false", "expert_iteration.rounds=0",
                             *(QUICK if quick else [])])  # fmt: skip
        (base / "wall_seconds").write_text(str(wall))
    trained["sft"] = _trained(base, "sft/final", ["sft"], float((base / "wall_seconds").read_text()))
    for arm in arms:
        settings, folder = ARM_SETTINGS[arm], root / arm
        shutil.rmtree(folder, ignore_errors=True)
        start = base / "sft" / "final"
        if "--skip-sft" in settings["flags"]:
            shutil.copytree(start, folder / "sft" / "final")
        sets = [*settings["set"], *extra, "evaluation.enabled=false", *(QUICK if quick else [])]
        if not arm.startswith("expert_iteration"):  # only its own arms iterate, whatever --set says
            sets.append("expert_iteration.rounds=0")
        elif quick:
            sets.append("expert_iteration.rounds=1")
        if arm == "more_sft":
            sets.append(f"sft_training.init_adapter={start}")
        wall = run_training(config, folder, seed, settings["flags"], sets)
        trained[arm] = _trained(folder, settings["adapter"], settings["phases"], wall)
    return trained


def _trained(folder: Path, adapter: str, phases: list[str], wall: float) -> dict[str, Any]:
    summary = json.loads((folder / "summary.json").read_text())
    records = [summary["phases"][phase] for phase in phases]
    return {"adapter": str(folder / adapter), "wall_seconds": wall,
            "train_seconds": sum(record["seconds"] for record in records),
            "steps": sum(record["steps"] for record in records),
            "peak_gib": (summary.get("memory") or {}).get("peak_rss_gib")}  # fmt: skip


def score(config_path: Path, adapter: str, seed: int, extra: list[str], cap: int | None) -> dict[str, Any]:
    """Every problem set's figures for ``adapter`` (this process loads the model once)."""
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.evaluation.evaluator import Evaluator
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.evaluation.scoring import by_difficulty, figures
    from llm_finetuning.rewards import build_rewards
    from llm_finetuning.tools.common import load_model
    from llm_finetuning.tools.evaluate import load_held_out

    config = PipelineConfig.from_yaml(config_path, [f"seed={seed}", *extra])
    session = load_model(config, adapter, generates=True)
    judge = CompletionJudge(config.prompt, *build_rewards(config.rewards, config.prompt))
    results = {}
    try:
        for name, problem_set in PROBLEM_SETS.items():
            count = min(problem_set["n"], cap or problem_set["n"])
            settings = json.dumps(problem_set["settings"]).replace('"', "")
            scored_config = config.with_overrides([f"data.seed={seed + EVAL_SEED_OFFSET}",
                                                   f"data.reasoning_gym.num_eval={count}",
                                                   f"data.reasoning_gym.settings={{chain_sum: {settings}}}",
                                                   "data.grpo.train_settings=null"])  # fmt: skip
            rows, _ = load_held_out(scored_config, session.manager.tokenizer, count)
            samples = SAMPLES if problem_set["sampled"] else None
            evaluator = Evaluator.from_config(scored_config, rows, judge, None, limit=len(rows), sampled_k=samples)
            greedy = evaluator.score(session.engine, f"{name} greedy")
            sampled = evaluator.score(session.engine, f"{name} sampled", sampled=True) if samples else None
            cell = {"n": len(rows), "greedy": figures(greedy)["answer_accuracy"],
                    "by_difficulty": by_difficulty(greedy, sampled)}  # fmt: skip
            if sampled:
                sampled_figures = figures(sampled)
                cell |= {f"avg@{SAMPLES}": sampled_figures["answer_accuracy"],
                         f"pass@{SAMPLES}": sampled_figures[f"pass@{SAMPLES}"]}  # fmt: skip
            results[name] = cell
    finally:
        session.free()
    return results


def score_in_child(config: Path, adapter: str, seed: int, extra: list[str], out: Path,
                   cap: int | None) -> dict[str, Any]:  # fmt: skip
    command = [sys.executable, __file__, "score", "--config", str(config), "--adapter", adapter, "--seed", str(seed),
               "--out", str(out), *[item for pair in extra for item in ("--set", pair)],
               *(["--problems", str(cap)] if cap else [])]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True)
    figures = {**json.loads(out.read_text()), "seconds": round(time.perf_counter() - started, 1)}
    out.write_text(json.dumps(figures))
    return figures


# The table's columns: problem set and figure.
COLUMNS = {"harder: greedy": ("harder (3-5 terms)", "greedy"), "avg@8": ("harder (3-5 terms)", f"avg@{SAMPLES}"),
           "pass@8": ("harder (3-5 terms)", f"pass@{SAMPLES}"), "SFT's problems": ("sft's (2-3 terms)", "greedy"),
           "3 digits": ("3 digits (2-4 terms)", "greedy")}  # fmt: skip
ROWS = {"sft": "SFT (the start)", "more_sft": "+ more SFT", "expert_iteration": "+ expert iteration", "grpo": "+ GRPO",
        "expert_iteration_grpo": "+ expert iteration, then GRPO"}


def mean_and_error(values: list[float], digits: int = 3) -> str:
    """``mean ± standard error`` (the error once there are two values)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values) / math.sqrt(len(values)):.{digits}f}"


def table(root: Path) -> str:
    """Every seed's results under ``root`` as one markdown table, then GRPO's margins on the harder problems."""
    runs = [json.loads(path.read_text()) for path in sorted(root.glob("seed*/results.json"))]
    lines = [f"{len(runs)} seeds ({', '.join(str(run['seed']) for run in runs)})", "",
             "| adapter | minutes | " + " | ".join(COLUMNS) + " |", "| --- " * (len(COLUMNS) + 2) + "|"]  # fmt: skip
    for arm, label in ROWS.items():
        records = [run["adapters"][arm] for run in runs if arm in run["adapters"]]
        if not records:
            continue
        minutes = "—" if arm == "sft" else mean_and_error([r["train_seconds"] / 60 for r in records], 1)
        cells = [mean_and_error([r["scored"][name][key] for r in records]) for name, key in COLUMNS.values()]
        lines.append(f"| {label} | {minutes} | " + " | ".join(cells) + " |")
    lines.append("")
    for other in ("sft", "more_sft", "expert_iteration"):
        margins = [100 * (run["adapters"]["grpo"]["scored"]["harder (3-5 terms)"]["greedy"]
                          - run["adapters"][other]["scored"]["harder (3-5 terms)"]["greedy"])
                   for run in runs if {"grpo", other} <= set(run["adapters"])]  # fmt: skip
        if margins:
            seeds = ", ".join(f"{margin:+.1f}" for margin in margins)
            lines.append(f"- GRPO - {ROWS[other].removeprefix('+ ')}, harder greedy, points: {seeds} (mean "
                         f"{statistics.fmean(margins):+.1f})")
    return "\n".join(lines)


def provenance(command: list[str]) -> dict[str, Any]:
    """The commit (with ``+changes`` when tracked files differ from it), the machine and the command."""
    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    changed = "+changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    return {"commit": git("rev-parse", "--short", "HEAD") + changed, "machine": f"{cpu}, {os.cpu_count()} cores",
            "command": " ".join(command), "date": time.strftime("%Y-%m-%d")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="all", choices=("all", "score", "table"))
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "smollm2_answer_only.yaml")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=Path, default=ROOT / "outputs" / "beyond_sft")
    parser.add_argument("--arms", default=",".join(ARM_SETTINGS))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--adapter", help="score: the adapter to score")
    parser.add_argument("--out", type=Path, help="score: where its figures go")
    parser.add_argument("--problems", type=int, help="score at most this many problems per set")
    parser.add_argument("--quick", action="store_true", help="a few steps per arm, 8 problems per set: a check")
    args = parser.parse_args()
    if args.mode == "score":
        args.out.write_text(json.dumps(score(args.config, args.adapter, args.seed, args.overrides, args.problems)))
        return 0
    if args.mode == "table":
        print(table(args.output_dir))
        return 0
    root = args.output_dir / f"seed{args.seed}"
    arms = [arm for arm in args.arms.split(",") if arm]
    args.problems = 8 if args.quick else args.problems
    trained = train_arms(args.config, root, args.seed, arms, args.overrides, args.quick)
    results = {"seed": args.seed, **provenance(sys.argv), "adapters": {}}
    for name, record in trained.items():
        if name == "sft" and (root / "sft.json").exists():  # the base adapter is kept between runs: so are its figures
            figures = json.loads((root / "sft.json").read_text())
        else:
            figures = score_in_child(args.config, record["adapter"], args.seed, args.overrides,
                                     root / f"{name}.json", args.problems)  # fmt: skip
        results["adapters"][name] = {**record, "scored": figures}
        (root / "results.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
