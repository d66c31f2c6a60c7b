"""Throughput with 1 and 2 processes, side by side in one run: SFT samples/s and GRPO completions/s.

    uv run python benchmarks/scaling.py [--sft-steps 100] [--grpo-steps 20] [--rounds 2]

Each setting runs the real pipeline (``run_training.py --config configs/tiny.yaml``, evaluations off, no
checkpoint inside the measured steps) as a child process from an empty output dir, and the phase times are
read from its ``summary.json`` (trainer built → training done: no start-up, no data preparation):

- 1 process, 1 thread         the baseline one rank of the 2-process run is measured against
- 1 process, all cores        what a single process gets from the same machine
- 2 processes, 1 thread each  ``accelerate launch --config_file configs/accelerate/cpu.yaml`` (DDP over gloo)

The per-device batch stays the config's (SFT 16 sequences, GRPO 32 completions = 4 prompts x 8), so 2
processes do twice the work per step (weak scaling). Scaling efficiency = 2-process throughput / (2 x the
1-thread throughput). Rounds alternate the order of the settings; the table shows the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SFT_BATCH, GRPO_BATCH = 16, 32  # per device, from configs/tiny.yaml
SETTINGS = {  # name -> (processes, threads per process; None = all cores)
    "1 process, 1 thread": (1, 1),
    "1 process, all cores": (1, None),
    "2 processes, 1 thread each": (2, 1),
}


def run_setting(processes: int, threads: int | None, sft_steps: int, grpo_steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as output_dir:
        overrides = [
            f"output_dir={output_dir}", f"num_threads={threads or 'null'}", "evaluation.enabled=false",
            f"sft_training.max_steps={sft_steps}", f"sft_training.save_steps={sft_steps}",
            f"grpo_training.max_steps={grpo_steps}", f"grpo_training.save_steps={grpo_steps}",
            "evaluation.grpo_every_steps=null", f"grpo_training.per_device_train_batch_size={GRPO_BATCH}",
            f"sft_training.per_device_train_batch_size={SFT_BATCH}",
        ]
        script = [str(ROOT / "run_training.py"), "--config", str(ROOT / "configs" / "tiny.yaml"),
                  *[arg for item in overrides for arg in ("--set", item)]]
        launcher = [sys.executable] if processes == 1 else [
            sys.executable, "-m", "accelerate.commands.launch", "--config_file",
            str(ROOT / "configs" / "accelerate" / "cpu.yaml"), "--num_processes", str(processes)]
        env = dict(os.environ)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.pop(name, None) if threads is None else env.__setitem__(name, str(threads))
        result = subprocess.run([*launcher, *script], cwd=ROOT, env=env, capture_output=True, text=True,
                                check=False)
        if result.returncode != 0:
            raise SystemExit(result.stderr[-3000:])
        summary = json.loads((Path(output_dir) / "summary.json").read_text())
    assert summary["processes"]["num_processes"] == processes, summary["processes"]  # the launch we asked for
    sft, grpo = summary["phases"]["sft"], summary["phases"]["grpo"]
    return {"sft_samples_per_s": sft["steps"] * SFT_BATCH * processes / sft["seconds"],
            "grpo_completions_per_s": grpo["steps"] * GRPO_BATCH * processes / grpo["seconds"],
            "sft_seconds": sft["seconds"], "grpo_seconds": grpo["seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft-steps", type=int, default=100)
    parser.add_argument("--grpo-steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    for round_index in range(args.rounds):
        order = list(SETTINGS) if round_index % 2 == 0 else list(reversed(SETTINGS))
        for name in order:
            results[name].append(run_setting(*SETTINGS[name], args.sft_steps, args.grpo_steps))
            print(f"round {round_index + 1} {name}: {results[name][-1]}", flush=True)
    median = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in results.items()}
    print(f"\nmachine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, load average "
          f"{os.getloadavg()[0]:.1f}; SFT {args.sft_steps} steps x {SFT_BATCH}/process, GRPO {args.grpo_steps} "
          f"steps x {GRPO_BATCH}/process; median of {args.rounds} rounds\n")
    print("| setting | SFT samples/s | GRPO completions/s | SFT s | GRPO s |\n|---|---|---|---|---|")
    for name, figures in median.items():
        print(f"| {name} | {figures['sft_samples_per_s']:.0f} | {figures['grpo_completions_per_s']:.1f} | "
              f"{figures['sft_seconds']:.1f} | {figures['grpo_seconds']:.1f} |")
    base, wide, two = (median[name] for name in SETTINGS)
    for key, label in (("sft_samples_per_s", "SFT"), ("grpo_completions_per_s", "GRPO")):
        print(f"{label}: 2 processes vs 2 x (1 process, 1 thread): {two[key] / (2 * base[key]):.0%} efficiency; "
              f"vs 1 process on all cores: {two[key] / wide[key]:.2f}x")


if __name__ == "__main__":
    main()
