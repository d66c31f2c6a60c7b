"""The offline demo against its acceptance figures, over several seeds: what the model learned, wall time, memory.

    uv run python benchmarks/tiny_demo.py --seeds 0,1,2 [--output-dir outputs/tiny_bench] [--runs 2]
                                         [-- extra run_training.py arguments]

For each seed S it runs ``run_training.py --config configs/tiny.yaml --set seed=S`` as a
child process in a fresh output dir (so the tiny base model is built too), takes the child's wall time and
peak RSS, and reads its ``summary.json``. Then it scores the trained model twice on the same held-out
problems, greedy: as trained (working-out, then answer) and with the working-out cut short (the answer tags
written right after the prompt, so the model must answer without working). It prints one table per seed,
the targets met or missed, and the mean and spread over the seeds. With ``--runs 2`` every seed runs twice
and the script says whether the same seed gave the same summary numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "tiny.yaml"
STAGES = ("before_sft", "after_sft", "after_grpo")
FIGURES = {"format_accuracy": "format", "answer_accuracy": "greedy", "sampled_answer_accuracy": "sampled"}


def run_once(output_dir: Path, seed: int, extra: list[str]) -> tuple[float, float, float, dict]:
    """One demo run in a child process: (wall seconds, CPU seconds, the child's peak RSS in GiB, its summary).

    CPU seconds (user + system) barely move when other processes share the cores; wall time does."""
    shutil.rmtree(output_dir, ignore_errors=True)
    command = [sys.executable, "run_training.py", "--config", str(CONFIG), "--output-dir", str(output_dir),
               "--set", f"seed={seed}", *extra]  # fmt: skip
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage (ru_maxrss in KiB on Linux)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"seed {seed}: run_training.py exited with {child.returncode}; see {output_dir}/training.log")
    cpu_seconds = usage.ru_utime + usage.ru_stime
    return seconds, cpu_seconds, usage.ru_maxrss / 2**20, json.loads((output_dir / "summary.json").read_text())


def working_ablation(output_dir: Path) -> dict[str, float]:
    """Greedy answer accuracy of the trained model on the run's held-out problems, with and without working.

    ``cut``: the prompt is followed by the reasoning end and solution start tags, so the first token the model
    writes is its answer; ``full``: the prompt as in training and evaluation.
    """
    import torch

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.rollout import (
        SamplingSettings,
        generate_completions,
        generation_budget,
        render_prompts,
    )
    from llm_finetuning.tools.common import default_adapter, load_model
    from llm_finetuning.tools.evaluate import load_held_out

    config = PipelineConfig.from_yaml(output_dir / "config.yaml")
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    session = load_model(config, default_adapter(config))
    manager = session.manager
    try:
        rows, _ = load_held_out(config, manager.tokenizer, None)
        judge, tags = CompletionJudge(config.prompt), config.prompt.reasoning_end + config.prompt.solution_start
        prompts = render_prompts(manager.tokenizer, list(rows["prompt"]))
        budget = generation_budget(config)
        accuracy = {}
        for name, texts, prefix in (("full", prompts, ""), ("cut", [p + tags for p in prompts], tags)):
            completions = generate_completions(
                manager.model, manager.tokenizer, texts, SamplingSettings(greedy=True, max_new_tokens=budget),
                batch_size=config.evaluation.batch_size,
            )  # fmt: skip
            correct = [judge.is_correct(prefix + group[0], row) for group, row in zip(completions, rows, strict=True)]
            accuracy[name] = sum(correct) / len(correct)
    finally:
        session.free()
    return accuracy


def seed_result(seed: int, seconds: float, cpu_seconds: float, peak_gib: float, summary: dict,
                ablation: dict) -> dict:
    ev = summary["eval"]
    return {
        "seed": seed,
        "eval": {stage: {key: ev[stage][key] for key in FIGURES} for stage in STAGES},
        "n": ev["after_sft"]["n"],
        "sampled_gain": 100 * (ev["after_grpo"]["sampled_answer_accuracy"] - ev["after_sft"]["sampled_answer_accuracy"]),
        "greedy_gain": 100 * (ev["after_grpo"]["answer_accuracy"] - ev["after_sft"]["answer_accuracy"]),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "peak_gib": peak_gib,
        "phases": {name: phase["seconds"] for name, phase in summary["phases"].items()},
        "ablation": ablation,
        "cpu": summary.get("cpu", {}),
    }


def checks(result: dict) -> list[tuple[str, str, bool]]:
    after_sft = result["eval"]["after_sft"]
    ablation = result["ablation"]
    return [
        ("held-out problems", f"{result['n']} (>= 200)", result["n"] >= 200),
        ("format after SFT", f"{after_sft['format_accuracy']:.3f} (>= 0.95)", after_sft["format_accuracy"] >= 0.95),
        ("greedy after SFT", f"{after_sft['answer_accuracy']:.3f} (0.3 .. 0.8)",
         0.3 <= after_sft["answer_accuracy"] <= 0.8),
        ("sampled gain, GRPO - SFT", f"{result['sampled_gain']:+.1f} pts (>= +10)", result["sampled_gain"] >= 10),
        ("greedy gain, GRPO - SFT", f"{result['greedy_gain']:+.1f} pts (>= +5)", result["greedy_gain"] >= 5),
        ("working-out is used", f"cut {ablation['cut']:.3f} < full {ablation['full']:.3f}",
         ablation["cut"] < ablation["full"]),
        ("wall time", f"{result['seconds']:.0f} s (<= 300; CPU {result['cpu_seconds']:.0f} s)",
         result["seconds"] <= 300),
        ("peak RSS", f"{result['peak_gib']:.2f} GiB (<= 3)", result["peak_gib"] <= 3),
    ]  # fmt: skip


def print_seed(result: dict) -> None:
    print(f"\nseed {result['seed']}: {'stage':<12}" + "".join(f"{label:>10}" for label in FIGURES.values()))
    for stage in STAGES:
        print(f"        {stage:<12}" + "".join(f"{result['eval'][stage][key]:>10.3f}" for key in FIGURES))
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in result["phases"].items())
    print(f"        phases: {phases}; without working-out {result['ablation']['cut']:.3f}, "
          f"with {result['ablation']['full']:.3f} (greedy, trained model)")
    for name, value, ok in checks(result):
        print(f"        {'PASS' if ok else 'MISS'}  {name:<26} {value}")


def print_table(results: list[dict]) -> None:
    """One row per seed and the mean (± the spread, max - min) over seeds, as a Markdown table."""
    header = ["seed", *(f"{stage} {label}" for stage in STAGES for label in FIGURES.values()),
              "GRPO gain sampled", "GRPO gain greedy", "no working (greedy)", "wall s", "CPU s",
              "peak RSS GiB"]  # fmt: skip

    def row(result: dict) -> list[float]:
        return [*(result["eval"][stage][key] for stage in STAGES for key in FIGURES), result["sampled_gain"],
                result["greedy_gain"], result["ablation"]["cut"], result["seconds"], result["cpu_seconds"],
                result["peak_gib"]]  # fmt: skip

    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for result in results:
        print(f"| {result['seed']} | " + " | ".join(_cell(value) for value in row(result)) + " |")
    columns = list(zip(*(row(result) for result in results)))
    cells = [f"{_cell(statistics.mean(c))} ± {_cell((max(c) - min(c)) / 2)}" for c in columns]
    print("| mean ± half-range | " + " | ".join(cells) + " |")
    cpu = results[0]["cpu"]
    print(f"\nCPU: {cpu.get('model')}; torch kernels {cpu.get('torch_capability')}; threads {cpu.get('threads')}")


def _cell(value: float) -> str:
    return f"{value:.3f}" if abs(value) < 1.5 else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0", help="comma-separated seeds: the seed of each run")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "outputs" / "tiny_bench")
    parser.add_argument("--runs", type=int, default=1, help="runs per seed; 2 also checks that a seed repeats")
    parser.add_argument("extra", nargs="*", help="extra run_training.py arguments (after --)")
    args = parser.parse_args()
    results, repeats = [], []
    for seed in (int(s) for s in args.seeds.split(",")):
        summaries = []
        for _ in range(args.runs):
            output_dir = args.output_dir / f"seed{seed}"
            seconds, cpu_seconds, peak_gib, summary = run_once(output_dir, seed, args.extra)
            summaries.append(summary)
        result = seed_result(seed, seconds, cpu_seconds, peak_gib, summary, working_ablation(output_dir))
        print_seed(result)
        results.append(result)
        repeats += [s["eval"] == summaries[0]["eval"] for s in summaries[1:]]
    print_table(results)
    if repeats:
        print(f"\nsame seed, same summary numbers: {'yes' if all(repeats) else 'NO'}")
    (args.output_dir / "tiny_demo.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
