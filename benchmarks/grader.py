"""Our math grader against math-verify on the labelled cases, each from a cold process, side by side.

Each grader runs in a fresh Python process (nothing imported or warmed up beforehand: the sympy
worker of ours starts when the first comparison is made, as in a real run) and grades the cases in
file order. Reported per grader: accuracy, false-positive rate (wrong answers accepted, over the
negatives), false-negative rate (right answers rejected, over the positives), throughput (cases/s over
the grading loop; the import is reported apart), p50/p99/max latency per case, then accuracy and FP
rate per group of categories (answer formats; long model outputs; hostile inputs) and the failures per
category. math-verify calls run under its own 5 s ``timeout_seconds``/``parsing_timeout`` (its
``signal.alarm`` works here because each call is in the main thread).

    uv run python benchmarks/grader.py                                  # every case, both graders
    uv run python benchmarks/grader.py --sample 320 --skip-hostile      # 320 random non-hostile cases
    uv run python benchmarks/grader.py --skip-math-verify
    uv run python benchmarks/grader.py --source independent             # the cases written apart from the grader
    uv run python benchmarks/grader.py --warm-worker                    # our sympy worker started first, as training does
    uv run python benchmarks/grader.py --conventions                    # gold answers rewritten in other conventions
    uv run python benchmarks/grader.py --conventions --golds math500.jsonl   # ... from a public dataset's answers

``--conventions`` grades, instead of the labelled cases, answers made from gold answers in the
conventions other models write (``grader_conventions``: decimal commas, thousands, percent, chains,
intervals as relations, several answers, approximate against exact, answers past the end of the turn,
numbers split over lines), and lists by class where our verdict and math-verify's disagree.

Matrix arithmetic (and any comparison exact arithmetic and floating point cannot settle) needs our
sympy worker; in a cold process the first such case waits for sympy's import (about 2 s), which then
shows in cases/s and the maximum. ``--warm-worker`` starts the worker before the loop, as
``build_rewards`` does when training starts, and reports that start apart.

Cases are JSON lines ``{"completion" | "completion_parts", "gold" | "gold_parts", "expected",
"category"}``, optionally ``"source"``; ``*_parts`` is ``[[text, times], ...]`` so megabyte-long
hostile inputs stay small on disk. ``"source": "independent"`` marks cases a second author wrote from
the answers models write, without the grader's rules at hand; the grader was measured on them before it
was changed for them (docs/benchmarks.md); ``"source": "batch9"`` marks a batch in nine formats where
the grader was weak, committed before it was changed for them. Results go in docs/benchmarks.md,
section "Grader".
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_CASES = Path(__file__).resolve().parent.parent / "tests" / "data" / "grader_cases.jsonl"
GROUPS = {"long_outputs": "long model outputs", "hostile": "hostile inputs"}  # the rest: answer formats


def load_cases(
    path: Path, sample: int | None, skip_hostile: bool, seed: int, source: str | None = None
) -> list[dict]:
    """The labelled cases (those from ``source`` when given) with ``*_parts`` fields expanded into
    ``completion`` / ``gold``."""
    cases = []
    for line in path.read_text().splitlines():
        case = json.loads(line)
        for field in ("completion", "gold"):
            if f"{field}_parts" in case:
                case[field] = "".join(text * times for text, times in case.pop(f"{field}_parts"))
        hostile = skip_hostile and case["category"] == "hostile"
        if not hostile and source in (None, case.get("source")):
            cases.append(case)
    if sample is not None and sample < len(cases):
        cases = random.Random(seed).sample(cases, sample)
    return cases


def cases_for(args: argparse.Namespace) -> list[dict]:
    """The labelled cases, or with ``--conventions`` the cases made from gold answers."""
    if not args.conventions:
        return load_cases(args.cases, args.sample, args.skip_hostile, args.seed, args.source)
    from grader_conventions import convention_cases, gold_answers

    return convention_cases(gold_answers(args.golds), args.seed)


def our_grader(warm: bool = False) -> Callable[[str, str], bool]:
    from llm_finetuning.grading import grade, warm_up

    if warm:
        warm_up()
    return grade


def math_verify_grader(warm: bool = False) -> Callable[[str, str], bool]:
    """math-verify's own pipeline: parse gold (in ``$…$``, as its docs show) and completion with its
    extraction, then verify (it has no worker to warm)."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it logs every timeout

    def grade(completion: str, gold: str) -> bool:
        try:
            gold_parsed = parse(f"${gold}$", parsing_timeout=5)
            return bool(verify(gold_parsed, parse(completion, parsing_timeout=5), timeout_seconds=5))
        except Exception:  # noqa: BLE001  (count a crash as "not equal", as a reward would)
            return False

    return grade


GRADERS = {"grade": our_grader, "math-verify": math_verify_grader}


def measure(grade: Callable[[str, str], bool], cases: list[dict]) -> dict:
    latencies, failures, groups = [], collections.Counter(), collections.defaultdict(lambda: [0, 0, 0, 0])
    verdicts = []
    started = time.perf_counter()
    for case in cases:
        t0 = time.perf_counter()
        verdict = grade(case["completion"], case["gold"])
        latencies.append(time.perf_counter() - t0)
        verdicts.append(bool(verdict))
        group = groups[GROUPS.get(case["category"], "answer formats")]  # cases, wrong, negatives, FP
        group[0] += 1
        group[2] += not case["expected"]
        if verdict != case["expected"]:
            failures[case["category"]] += 1
            group[1] += 1
            group[3] += bool(verdict)
    total = time.perf_counter() - started
    positives = sum(c["expected"] for c in cases)
    false_pos = sum(g[3] for g in groups.values())
    latencies.sort()
    return {
        "cases": len(cases),
        "accuracy": 1 - sum(failures.values()) / len(cases),
        "false_positive_rate": false_pos / max(1, len(cases) - positives),
        "false_negative_rate": (sum(failures.values()) - false_pos) / max(1, positives),
        "cases_per_s": len(cases) / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "max_ms": 1000 * latencies[-1],
        "groups": {name: _group_figures(g) for name, g in sorted(groups.items())},
        "failures": dict(sorted(failures.items())),
        "verdicts": verdicts,
    }


def _group_figures(counts: list[int]) -> dict:
    cases, wrong, negatives, false_pos = counts
    return {"cases": cases, "accuracy": 1 - wrong / cases, "fp_rate": false_pos / max(1, negatives)}


def run_child(name: str, args: argparse.Namespace) -> None:
    """In a fresh process: import the grader (timed apart), grade the cases, print the figures as JSON."""
    cases = cases_for(args)
    started = time.perf_counter()
    grade = GRADERS[name](args.warm_worker)
    imported = time.perf_counter() - started
    print(json.dumps({"import_s": imported, **measure(grade, cases)}))


def report(name: str, result: dict, warm: bool = False) -> None:
    print(
        f"{name:<12} accuracy {result['accuracy']:.3f}  FP rate {result['false_positive_rate']:.3f}  "
        f"FN rate {result['false_negative_rate']:.3f}  {result['cases_per_s']:.0f} cases/s  "
        f"p50 {result['p50_ms']:.2f} ms  p99 {result['p99_ms']:.1f} ms  max {result['max_ms']:.0f} ms  "
        f"(import{' and worker start' if warm else ''} {result['import_s']:.2f} s)"
    )
    for group, figures in result["groups"].items():
        print(
            f"{'':<12} {group:<20} {figures['cases']:>4} cases  accuracy {figures['accuracy']:.3f}  "
            f"FP rate {figures['fp_rate']:.3f}"
        )
    print(f"{'':<12} failures by category: {result['failures'] or 'none'}")


def by_class(cases: list[dict], results: dict[str, dict]) -> None:
    """Per class: each grader's accuracy against the documented verdicts, how often the two agree,
    and the first disagreements."""
    names = list(results)
    print(f"\n{'class':<18} {'cases':>5}  " + "  ".join(f"{n:>11}" for n in names) + "  agree")
    disagreements = collections.defaultdict(list)
    for category in dict.fromkeys(case["category"] for case in cases):
        rows = [i for i, case in enumerate(cases) if case["category"] == category]
        right = [sum(results[n]["verdicts"][i] == cases[i]["expected"] for i in rows) / len(rows) for n in names]
        agree = [i for i in rows if len({results[n]["verdicts"][i] for n in names}) == 1]
        print(f"{category:<18} {len(rows):>5}  " + "  ".join(f"{r:>11.3f}" for r in right)
              + f"  {len(agree) / len(rows):.3f}")  # fmt: skip
        disagreements[category] = [i for i in rows if i not in set(agree)]
    for category, rows in disagreements.items():
        for i in rows[:3]:
            verdicts = ", ".join(f"{n} {results[n]['verdicts'][i]}" for n in names)
            print(f"  {category}: {cases[i]['completion'][10:-11]!r} vs {cases[i]['gold']!r}: "
                  f"expected {cases[i]['expected']}; {verdicts}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--sample", type=int, default=None, help="grade this many random cases")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    parser.add_argument("--skip-hostile", action="store_true", help="leave out the hostile inputs")
    parser.add_argument("--source", default=None, help="only the cases with this source (e.g. independent)")
    parser.add_argument("--skip-math-verify", action="store_true")
    parser.add_argument(
        "--warm-worker", action="store_true", help="start our sympy worker before grading (timed with the import)"
    )
    parser.add_argument("--conventions", action="store_true", help="grade gold answers rewritten in other conventions")
    parser.add_argument("--golds", type=Path, default=None, help="with --conventions: a JSONL file of gold answers")
    parser.add_argument("--child", choices=sorted(GRADERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args)
        return
    cases = cases_for(args)
    positives = sum(c["expected"] for c in cases)
    source = f"gold answers of {args.golds or 'tests/data'}" if args.conventions else args.cases
    print(f"{len(cases)} cases ({positives} positive, {len(cases) - positives} negative) from {source}")
    results = {}
    for name in [n for n in GRADERS if not (args.skip_math_verify and n == "math-verify")]:
        child = [sys.executable, __file__, "--child", name, *sys.argv[1:]]
        output = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        results[name] = json.loads(output.strip().splitlines()[-1])
        report(name, results[name], args.warm_worker and name == "grade")
    if args.conventions:
        by_class(cases, results)


if __name__ == "__main__":
    main()
