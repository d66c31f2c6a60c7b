"""Score a model on a benchmark: accuracy, format accuracy, pass@k, length, and breakdowns by subject and level.

Any dataset the data layer reads works (a Hub name such as ``HuggingFaceH4/MATH-500`` or ``openai/gsm8k``,
or a local .jsonl/.json/.parquet/.csv file); its schema is detected as in training. Every problem is
answered ``--k`` times (greedy when k = 1, else sampled with the config's GRPO sampling settings) through
the one batched generation function, and judged by the same grader and rewards as training.

    uv run python -m llm_finetuning.evaluate --config configs/tiny.yaml --adapter outputs/tiny/grpo_saved_lora
    uv run python -m llm_finetuning.evaluate --adapter outputs/grpo_saved_lora \\
        --data HuggingFaceH4/MATH-500 --split test --k 4 --max-samples 200

Writes ``results.jsonl`` (one row per problem: prompt, completions, extracted answers, gold, correct, each
reward) and ``metrics.json`` into ``--output-dir`` (default ``eval_runs/<timestamp>/``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .atomic_io import write_json_atomic
from .config import DatasetSpec, PipelineConfig
from .errors import DataError, PipelineError
from .tools import common

__all__ = [
    "BREAKDOWN_COLUMNS",
    "breakdowns",
    "evaluate",
    "load_problems",
    "load_raw",
    "main",
    "render_table",
    "score",
    "summary_figures",
]

BREAKDOWN_COLUMNS = ("subject", "level")  # metadata the data layer keeps (MATH: subject/type, level)


def load_raw(config: PipelineConfig, spec: DatasetSpec) -> Any:
    """The dataset's rows, checked for a schema the data layer can read before any model loads."""
    from .data import DatasetLoader
    from .data.formats import resolve_adapter

    if _blank_file(Path(spec.name).expanduser()):  # datasets raises a bare StopIteration on these
        raise DataError(f"{spec.name}: the file is empty; point --data at a file with one problem per row")
    raw = DatasetLoader(spec, config.data.seed, synthetic=config.data.synthetic).load()
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
    """Every usable problem as ``prompt``/``answer`` rows (+ metadata), and the data layer's counts.

    The GRPO processor shapes the rows, with its training-only choices turned off: no validation split and
    no percentile thinning; only prompts that leave no room for ``max_new_tokens`` are dropped (counted).
    Data with held-out rows (``synthetic:*``) is scored on those.
    """
    from .data import DatasetProcessor

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
    if spec.max_samples is not None:
        rows = rows.select(range(min(spec.max_samples, len(rows))))
    return rows, data.stats


def _sampling(config: PipelineConfig, k: int, max_new_tokens: int) -> Any:
    from .evaluation.generation import SamplingSettings

    if k == 1:
        return SamplingSettings(greedy=True, max_new_tokens=max_new_tokens)
    return common.grpo_sampling(config, k, max_new_tokens)


def score(config: PipelineConfig, rows: Any, groups: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """One result row per problem: its completions judged by the training grader and rewards."""
    from .evaluation.metrics import CompletionJudge
    from .grading import extract_answer
    from .rewards import build_rewards

    funcs, weights = build_rewards(config.rewards, config.prompt)
    judge = CompletionJudge(config.prompt, funcs, weights)
    tags = {"solution_start": config.prompt.solution_start, "solution_end": config.prompt.solution_end}
    metadata = [column for column in BREAKDOWN_COLUMNS if column in rows.column_names]
    results = []
    for index, (row, group) in enumerate(zip(rows, groups, strict=True)):
        texts, gold = [c.text for c in group], str(row["answer"])
        correct = [judge.is_correct(text, gold) for text in texts]
        scores = common.reward_scores(funcs, [row["prompt"]] * len(texts), texts, [gold] * len(texts))
        results.append(
            {
                "index": index,
                "prompt": row["prompt"][-1]["content"],
                "gold": gold,
                "completions": texts,
                "extracted_answers": [extract_answer(text, **tags) for text in texts],
                "correct": correct,
                "passed": any(correct),
                "formatted": judge.is_formatted(texts),
                "num_tokens": [c.num_tokens for c in group],
                "finished": [c.finished for c in group],
                "rewards": scores,
                "total_reward": common.weighted_total(scores, weights),
                **{column: row[column] for column in metadata},
            }
        )
    return results


def summary_figures(results: Sequence[dict[str, Any]], k: int) -> dict[str, Any]:
    """Accuracy (over all completions; greedy accuracy when k = 1), format accuracy, pass@k, length, rewards."""

    def mean_over(key: str) -> float:
        values = [float(v) for r in results for v in r[key]]
        return round(statistics.fmean(values), 4) if values else 0.0

    reward_names = list(results[0]["rewards"]) if results else []
    return {
        "n": len(results),
        "k": k,
        "accuracy": mean_over("correct"),
        "format_accuracy": mean_over("formatted"),
        f"pass@{k}": round(statistics.fmean(r["passed"] for r in results), 4) if results else 0.0,
        "avg_length_tokens": mean_over("num_tokens"),
        "truncation_rate": round(1 - mean_over("finished"), 4) if results else 0.0,
        "avg_total_reward": mean_over("total_reward"),
        "rewards": {
            name: round(statistics.fmean(s for r in results for s in r["rewards"][name]), 4)
            for name in reward_names
        },
    }


def breakdowns(results: Sequence[dict[str, Any]], k: int) -> dict[str, dict[str, dict[str, Any]]]:
    """The figures per value of each breakdown column the results carry (e.g. per subject, per level)."""
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for column in BREAKDOWN_COLUMNS:
        if not results or column not in results[0]:
            continue
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for result in results:
            groups[str(result[column])].append(result)
        tables[column] = {
            value: _short(summary_figures(members, k), k) for value, members in sorted(groups.items())
        }
    return tables


def _short(figures: dict[str, Any], k: int) -> dict[str, Any]:
    keys = ("n", "accuracy", "format_accuracy", f"pass@{k}", "avg_length_tokens")
    return {key: figures[key] for key in keys}


def evaluate(
    config: PipelineConfig,
    adapter: str | Path | None,
    spec: DatasetSpec,
    *,
    k: int = 1,
    output_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Generate, judge and write ``results.jsonl`` and ``metrics.json``; return the metrics."""
    from .evaluation.generation import generate_detailed

    if k < 1:
        raise PipelineError(f"--k must be >= 1 (got {k})")
    output = Path(output_dir or Path("eval_runs") / time.strftime("%Y%m%d-%H%M%S"))
    started = time.perf_counter()
    raw = load_raw(config, spec)
    budget = common.generation_budget(config)
    manager = common.load_model(config, adapter)
    try:
        rows, stats = load_problems(config, manager.tokenizer, raw, spec, budget)
        groups = generate_detailed(
            manager.model, manager.tokenizer, list(rows["prompt"]), _sampling(config, k, budget),
            batch_size=config.evaluation.batch_size, progress=True, description=f"evaluate {spec.name}",
        )  # fmt: skip
    finally:
        manager.free()
    results = score(config, rows, groups)
    metrics = {
        **summary_figures(results, k),
        "breakdowns": breakdowns(results, k),
        "data": {"name": spec.name, "split": spec.split, "counts": stats},
        "adapter": str(adapter) if adapter else None,
        "max_new_tokens": budget,
        "seconds": round(time.perf_counter() - started, 2),
    }
    output.mkdir(parents=True, exist_ok=True)
    with (output / "results.jsonl").open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(result, ensure_ascii=False) + "\n" for result in results)
    write_json_atomic(output / "metrics.json", metrics)
    metrics["output_dir"] = str(output)
    return metrics


def render_table(metrics: dict[str, Any]) -> str:
    k = metrics["k"]
    lines = [
        (
            f"{metrics['data']['name']}: {metrics['n']} problems, k = {k} "
            f"({'greedy' if k == 1 else 'sampled'}), adapter {metrics['adapter']}"
        ),
        "",
    ]
    for key in (
        "accuracy",
        "format_accuracy",
        f"pass@{k}",
        "avg_length_tokens",
        "truncation_rate",
        "avg_total_reward",
    ):
        lines.append(f"{key:<20} {metrics[key]:>8.3f}")
    for column, table in metrics["breakdowns"].items():
        lines += ["", f"{column:<24} {'n':>5} {'accuracy':>9} {'format':>7} {f'pass@{k}':>7}"]
        for value, figures in table.items():
            lines.append(
                f"{value[:24]:<24} {figures['n']:>5} {figures['accuracy']:>9.3f} "
                f"{figures['format_accuracy']:>7.3f} {figures[f'pass@{k}']:>7.3f}"
            )
    if "output_dir" in metrics:
        lines += ["", f"wrote {metrics['output_dir']}/results.jsonl and metrics.json"]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m llm_finetuning.evaluate", description=__doc__.splitlines()[0]
    )
    common.add_config_arguments(parser)
    parser.add_argument(
        "--adapter", help="trained weights (LoRA adapter or full save); default: the base model"
    )
    parser.add_argument(
        "--data", help="Hub dataset or local file/folder (default: the config's GRPO dataset)"
    )
    parser.add_argument(
        "--split", default=None, help="Hub split (default: test for --data, else the config's)"
    )
    parser.add_argument("--subset", default=None, help="Hub configuration name (e.g. main for openai/gsm8k)")
    parser.add_argument(
        "--format", default="auto", help="schema adapter (default: detected from the columns)"
    )
    parser.add_argument("--max-samples", type=int, help="score at most this many problems")
    parser.add_argument("--k", type=int, default=1, help="completions per problem for pass@k (1 = greedy)")
    parser.add_argument("--output-dir", help="where results go (default: eval_runs/<timestamp>/)")
    return parser


def dataset_spec(args: argparse.Namespace, config: PipelineConfig) -> DatasetSpec:
    """``--data`` and its flags as a ``DatasetSpec`` (validated like a config section), or the config's GRPO data."""
    from .config_loading import build_dataclass

    if args.max_samples is not None and args.max_samples < 1:
        raise PipelineError(f"--max-samples must be >= 1 (got {args.max_samples})")
    if args.data is None:
        base = {"name": config.data.grpo.name, "subset": config.data.grpo.subset, "split": config.data.grpo.split,
                "format": config.data.grpo.format}  # fmt: skip
    else:
        base = {
            "name": args.data,
            "subset": args.subset,
            "split": args.split or "test",
            "format": args.format,
        }
    return build_dataclass(DatasetSpec, {**base, "max_samples": args.max_samples}, path="--data")


def main(argv: Sequence[str] | None = None) -> int:
    args = common.parse_with(build_parser(), argv)

    def body() -> int:
        from .logging_setup import setup_logging

        config = common.resolve_config(args)
        setup_logging(config.log_level)
        metrics = evaluate(
            config, args.adapter, dataset_spec(args, config), k=args.k, output_dir=args.output_dir
        )
        print(render_table(metrics))
        return 0

    return common.run_reporting_errors(body)


if __name__ == "__main__":
    sys.exit(main())
