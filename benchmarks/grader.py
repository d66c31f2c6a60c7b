"""Our math grader against math-verify on the labelled cases, side by side in one run.

For each grader: accuracy, false-positive rate (wrong answers accepted, over the negatives),
false-negative rate (right answers rejected, over the positives), throughput (cases/s, one process),
p50/p99/max latency per case and the failures per category. Each math-verify call runs under its
own 5 s ``timeout_seconds`` (its ``signal.alarm`` works here because this runs in the main thread).

    uv run python benchmarks/grader.py [--cases tests/data/grader_cases.jsonl] [--skip-math-verify]

Cases are JSON lines ``{"completion" | "completion_parts", "gold" | "gold_parts", "expected",
"category"}``; ``*_parts`` is ``[[text, times], ...]`` so megabyte-long hostile inputs stay small
on disk. Results go in docs/benchmarks.md, section "Grader".
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from llm_finetuning.grading import extract as math_grading

DEFAULT_CASES = Path(__file__).resolve().parent.parent / "tests" / "data" / "grader_cases.jsonl"


def load_cases(path: Path) -> list[dict]:
    """The labelled cases with ``*_parts`` fields expanded into ``completion`` / ``gold``."""
    cases = []
    for line in path.read_text().splitlines():
        case = json.loads(line)
        for field in ("completion", "gold"):
            if f"{field}_parts" in case:
                case[field] = "".join(text * times for text, times in case.pop(f"{field}_parts"))
        cases.append(case)
    return cases


def math_verify_grader() -> Callable[[str, str], bool]:
    """math-verify's own pipeline: parse gold (in ``$…$``, as its docs show) and completion with its
    extraction, then verify."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it logs every timeout

    def grade(completion: str, gold: str) -> bool:
        try:
            gold_parsed = parse(f"${gold}$", parsing_timeout=5)
            return bool(verify(gold_parsed, parse(completion, parsing_timeout=5), timeout_seconds=5))
        except Exception:  # noqa: BLE001  (count a crash as "not equal", as a reward would)
            return False

    return grade


def measure(grade: Callable[[str, str], bool], cases: list[dict]) -> dict:
    latencies, failures = [], collections.Counter()
    false_pos = false_neg = 0
    started = time.perf_counter()
    for case in cases:
        t0 = time.perf_counter()
        verdict = grade(case["completion"], case["gold"])
        latencies.append(time.perf_counter() - t0)
        if verdict != case["expected"]:
            failures[case["category"]] += 1
            false_pos += verdict and not case["expected"]
            false_neg += case["expected"] and not verdict
    total = time.perf_counter() - started
    positives = sum(c["expected"] for c in cases)
    latencies.sort()
    return {
        "accuracy": 1 - sum(failures.values()) / len(cases),
        "false_positive_rate": false_pos / max(1, len(cases) - positives),
        "false_negative_rate": false_neg / max(1, positives),
        "cases_per_s": len(cases) / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "max_ms": 1000 * latencies[-1],
        "failures": dict(failures),
    }


def report(name: str, result: dict) -> None:
    print(
        f"{name:<14} accuracy {result['accuracy']:.3f}  FP rate {result['false_positive_rate']:.3f}  "
        f"FN rate {result['false_negative_rate']:.3f}  {result['cases_per_s']:.0f} cases/s  "
        f"p50 {result['p50_ms']:.2f} ms  p99 {result['p99_ms']:.1f} ms  max {result['max_ms']:.0f} ms"
    )
    print(f"{'':<14} failures by category: {result['failures'] or 'none'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--skip-math-verify", action="store_true")
    args = parser.parse_args()
    cases = load_cases(args.cases)
    positives = sum(c["expected"] for c in cases)
    print(f"{len(cases)} cases ({positives} positive, {len(cases) - positives} negative) from {args.cases}")
    math_grading.warm_up()  # sympy's import in the worker (seconds, once per process) is not timed
    report("grade", measure(math_grading.grade, cases))
    if not args.skip_math_verify:
        report("math-verify", measure(math_verify_grader(), cases))


if __name__ == "__main__":
    main()
