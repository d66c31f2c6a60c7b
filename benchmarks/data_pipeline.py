"""Data-layer throughput: 20,000 generated GRPO rows through format, tokenize, percentile filter and split.

    uv run python benchmarks/data_pipeline.py [--rows 20000] [--rounds 3] [--heldout-by tuples]

Uses the demo's settings (configs/tiny.yaml) and the tiny model's tokenizer, built once before timing.
Generation is timed on its own; the processor's stages come from ``GRPOData.seconds``. Each round
processes the same rows again; the median round is reported (the first round pays for warm-up).
Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("format", "tokenize", "length_filter", "split")


def tokenizer_for(config):
    from transformers import AutoTokenizer

    from llm_finetuning.model.sources import base_model_path
    from llm_finetuning.model.template import apply_chat_template_to

    return apply_chat_template_to(AutoTokenizer.from_pretrained(base_model_path(config)), config.prompt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="generated rows (training + held-out)")
    parser.add_argument("--rounds", type=int, default=3, help="times the same rows are processed")
    parser.add_argument("--heldout-by", default="tuples", choices=["tuples", "wording"])
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    logging.basicConfig(level=logging.WARNING)

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data import DatasetLoader, DatasetProcessor

    num_eval = args.rows // 20
    config = PipelineConfig.from_yaml(
        ROOT / "configs" / "tiny.yaml",
        [
            f"data.synthetic.num_train={args.rows - num_eval}",
            f"data.synthetic.num_eval={num_eval}",
            f"data.synthetic.heldout_by={args.heldout_by}",
        ],
    )
    with tempfile.TemporaryDirectory() as output_dir:
        tokenizer = tokenizer_for(config.replace(output_dir=output_dir))
        spec = config.data.grpo
        clock = time.perf_counter()
        raw = DatasetLoader(spec, config.problem_seed, synthetic=config.data.synthetic).load()
        generate = time.perf_counter() - clock
        rounds = [DatasetProcessor(config, tokenizer).grpo_dataset(raw, spec) for _ in range(args.rounds)]
    totals = [sum(data.seconds.values()) for data in rounds]
    median = rounds[totals.index(statistics.median_low(totals))]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {_cpu_model()}")
    print(f"rows: {len(raw)} generated in {generate:.2f} s (heldout_by {args.heldout_by})")
    print(f"stats: {median.stats}")
    print(
        f"max_prompt_length {median.max_prompt_length}, max_completion_length {median.max_completion_length}"
    )
    print("\n| stage | seconds (median round) | rows/s |\n|---|---|---|")
    for stage in STAGES:
        seconds = median.seconds[stage]
        print(f"| {stage} | {seconds:.3f} | {len(raw) / seconds:,.0f} |")
    total = sum(median.seconds.values())
    print(f"| **process total** | **{total:.3f}** | **{len(raw) / total:,.0f}** |")
    print(f"\nall rounds (s): {', '.join(f'{t:.3f}' for t in totals)}")


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
