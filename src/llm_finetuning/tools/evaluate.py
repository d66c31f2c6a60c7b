"""Score a model on a benchmark: accuracy, format accuracy, pass@k, length, and breakdowns by subject and level.

Without ``--data`` it scores the run's own held-out problems (the GRPO validation rows the pipeline's
evaluations use, never the rows GRPO trained on). With ``--data`` any dataset the data layer reads works (a Hub
name such as ``HuggingFaceH4/MATH-500`` or ``openai/gsm8k``, or a local .jsonl/.json/.parquet/.csv file); its
schema is detected as in training. Every problem is answered ``--k`` times (greedy when k = 1, else sampled
with the config's GRPO sampling settings) by the pipeline's own ``Evaluator``: the same generation, grader,
rewards and metric names as the evaluations of a run.

    uv run python -m llm_finetuning.tools.evaluate --config configs/tiny.yaml --adapter outputs/tiny/grpo_saved_lora
    uv run python -m llm_finetuning.tools.evaluate --adapter outputs/grpo_saved_lora \\
        --data HuggingFaceH4/MATH-500 --split test --k 4 --max-samples 200

Writes ``results.jsonl`` (one row per problem: prompt, completions, extracted answers, gold, correct, each
reward) and ``metrics.json`` into ``--output-dir`` (default ``eval_runs/<timestamp>/``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..config import DatasetSpec, PipelineConfig
from ..errors import DataError, PipelineError
from ..runtime.atomic_io import write_json_atomic, write_text_atomic
from . import common
from .train import add_config_arguments, command

__all__ = ["dataset_spec", "evaluate", "load_problems", "load_raw", "main", "render_table"]

HELD_OUT = "held-out"  # the split name reported when the run's own held-out problems are scored


def load_raw(config: PipelineConfig, spec: DatasetSpec) -> Any:
    """The dataset's rows, checked for a schema the data layer can read before any model loads."""
    from ..data import DatasetLoader
    from ..data.formats import resolve_adapter

    if _blank_file(Path(spec.name).expanduser()):  # datasets raises a bare StopIteration on these
        raise DataError(f"{spec.name}: the file is empty; point --data at a file with one problem per row")
    raw = DatasetLoader.for_data(spec, config).load()
    if len(raw) == 0:
        raise DataError(f"{spec.name}: no rows; point --data at a file with one problem per row")
    resolve_adapter(spec, raw.column_names)  # a DataError naming the missing columns
    return raw


def _blank_file(path: Path, probe: int = 4096) -> bool:
    if not path.is_file() or path.stat().st_size > probe:
        return False
    return not path.read_bytes().strip()


def load_problems(
    config: PipelineConfig, tokenizer: Any, raw: Any, spec: DatasetSpec, max_new_tokens: int
) -> tuple[Any, dict]:
    """Every usable problem of a benchmark as ``prompt``/``answer`` rows (+ metadata), and the data layer's counts.

    The GRPO processor shapes the rows, with its training-only choices turned off: no validation split and
    no percentile thinning; only prompts that leave no room for ``max_new_tokens`` are dropped (counted).
    Data with held-out rows (``synthetic:*``) is scored on those.
    """
    from ..data import DatasetProcessor

    eval_config = config.with_overrides(
        [
            "grpo_training.train_validation_split=1.0",
            "grpo_training.max_prompt_length=null",
            f"grpo_training.max_completion_length={max_new_tokens}",
            "data.prompt_length_percentile=100",
        ]
    )
    data = DatasetProcessor(eval_config, tokenizer).grpo_dataset(raw, spec)
    rows = data.validation if data.validation is not None else data.train
    return _first(rows, spec.max_samples), data.stats


def load_held_out(config: PipelineConfig, tokenizer: Any, max_samples: int | None) -> tuple[Any, dict]:
    """The run's own held-out problems: the GRPO validation rows the pipeline's evaluations score."""
    from ..data import load_grpo_data

    data = load_grpo_data(config, tokenizer)
    if data.validation is None or len(data.validation) == 0:
        raise DataError(
            f"{config.data.grpo.name}: the config keeps no held-out split (grpo_training.train_validation_split "
            "= 1.0), and scoring the problems GRPO trained on says little; pass --data DATASET to score a benchmark"
        )
    return _first(data.validation, max_samples or config.evaluation.num_samples), data.stats


def _first(rows: Any, count: int | None) -> Any:
    return rows if count is None else rows.select(range(min(count, len(rows))))


def evaluate(
    config: PipelineConfig,
    adapter: str | Path | None,
    spec: DatasetSpec | None,
    *,
    k: int = 1,
    max_samples: int | None = None,
    output_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Generate, judge and write ``results.jsonl`` and ``metrics.json``; return the metrics.

    ``spec`` None scores the run's held-out problems (as the pipeline's evaluations do), else the benchmark.
    """
    from ..data.loader import dataset_note
    from ..evaluation.evaluator import Evaluator
    from ..evaluation.judge import CompletionJudge
    from ..evaluation.scoring import breakdowns, figures, sample_answers
    from ..reporting.progress import log_samples
    from ..rewards import build_rewards
    from ..rollout import generation_budget

    if k < 1:
        raise PipelineError(f"--k must be >= 1 (got {k})")
    output = Path(output_dir or Path("eval_runs") / time.strftime("%Y%m%d-%H%M%S"))
    started = time.perf_counter()
    session = common.open_session(config, generates=True)  # before the data loads: no library bars
    raw = load_raw(config, spec) if spec is not None else None
    judge = CompletionJudge(config.prompt, *build_rewards(config.rewards, config.prompt))
    budget = generation_budget(config)
    loaded = common.load_model(config, adapter, generates=True, session=session)
    try:
        if spec is None:
            rows, stats = load_held_out(config, loaded.manager.tokenizer, max_samples)
        else:
            rows, stats = load_problems(config, loaded.manager.tokenizer, raw, spec, budget)
        name = spec.name if spec is not None else config.data.grpo.name
        evaluator = Evaluator.from_config(config, rows, judge, None, limit=len(rows), sampled_k=k)
        results = evaluator.score(loaded.engine, f"eval {name}", sampled=k > 1)
    finally:
        loaded.free()
    log_samples(sample_answers(results, config.evaluation.sample_answers))
    data = {"name": name, "split": HELD_OUT if spec is None else spec.split, "counts": stats, "note": dataset_note(name)}
    metrics = {**figures(results), "breakdowns": breakdowns(results), "data": data,
               "adapter": str(adapter) if adapter else None, "engine": loaded.engine.name, "max_new_tokens": budget,
               "seconds": round(time.perf_counter() - started, 2)}  # fmt: skip
    return write_results(output, results, metrics)


def write_results(output: Path, results: list[dict[str, Any]], metrics: dict[str, Any]) -> dict[str, Any]:
    """``results.jsonl`` (one scored row per problem) and ``metrics.json`` into ``output``; the metrics with it."""
    output.mkdir(parents=True, exist_ok=True)
    write_text_atomic(output / "results.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results))
    write_json_atomic(output / "metrics.json", metrics)
    return {**metrics, "output_dir": str(output)}


def render_table(metrics: dict[str, Any]) -> str:
    k, data = metrics["k"], metrics["data"]
    title = (f"{data['name']} ({data['split']} split): {metrics['n']} problems, k = {k} "
             f"({'greedy' if k == 1 else 'sampled'}), adapter {metrics['adapter']}, {metrics['engine']} engine")
    lines = [title, *([f"note: {data['note']}"] if data.get("note") else []), ""]
    for key in ("answer_accuracy", "format_accuracy", f"pass@{k}", "avg_completion_tokens", "truncation_rate",
                "avg_total_reward"):
        if key in metrics:
            lines.append(f"{key:<22} {metrics[key]:>8.3f}")
    passed = f"pass@{k}"
    for column, table in metrics["breakdowns"].items():
        lines += ["", f"{column:<24} {'n':>5} {'accuracy':>9} {'format':>7}" + (f" {passed:>7}" if k > 1 else "")]
        for value, figures in table.items():
            lines.append(
                f"{value[:24]:<24} {figures['n']:>5} {figures['answer_accuracy']:>9.3f} "
                f"{figures['format_accuracy']:>7.3f}" + (f" {figures[passed]:>7.3f}" if k > 1 else "")
            )
    if "output_dir" in metrics:
        lines += ["", f"wrote {metrics['output_dir']}/results.jsonl and metrics.json"]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m llm_finetuning.tools.evaluate", description=__doc__.splitlines()[0]
    )
    add_config_arguments(parser)
    common.add_engine_argument(parser)
    parser.add_argument("--adapter", help="trained weights (LoRA adapter or full save); default: the base model")
    parser.add_argument(
        "--data", help="Hub dataset or local file/folder (default: the run's held-out problems, as in training)"
    )
    parser.add_argument("--split", default=None, help="Hub split of --data (default: test)")
    parser.add_argument(
        "--subset", default=None,
        help="Hub configuration name (e.g. main for openai/gsm8k); several, comma-separated, are concatenated",
    )
    parser.add_argument("--format", default="auto", help="schema adapter (default: detected from the columns)")
    parser.add_argument(
        "--max-samples", type=int, help="score at most this many problems (default: all; held-out: evaluation.num_samples)"
    )
    parser.add_argument("--k", type=int, default=1, help="completions per problem for pass@k (1 = greedy)")
    parser.add_argument("--output-dir", help="where results go (default: eval_runs/<timestamp>/)")
    return parser


def dataset_spec(args: argparse.Namespace) -> DatasetSpec | None:
    """``--data`` and its flags as a ``DatasetSpec`` (validated like a config section); None without ``--data``."""
    from ..schema import build_dataclass

    if args.max_samples is not None and args.max_samples < 1:
        raise PipelineError(f"--max-samples must be >= 1 (got {args.max_samples})")
    if args.data is None:
        return None
    subsets = args.subset.split(",") if args.subset and "," in args.subset else args.subset
    raw = {"name": args.data, "subset": subsets, "split": args.split or "test", "format": args.format,
           "max_samples": args.max_samples}  # fmt: skip
    return build_dataclass(DatasetSpec, raw, path="--data")


@command(build_parser)
def main(args: argparse.Namespace) -> int:
    config = common.config_from(args)
    metrics = evaluate(config, args.adapter, dataset_spec(args), k=args.k, max_samples=args.max_samples,
                       output_dir=args.output_dir)  # fmt: skip
    print(render_table(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
