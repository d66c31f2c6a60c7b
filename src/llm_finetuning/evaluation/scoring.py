"""Score generated completions, and the figures every evaluation reports under one set of names.

The pipeline's evaluations (before SFT, after SFT, during and after GRPO) and the ``evaluate`` tool both go
through ``score_problems`` (one row per problem) and ``figures`` (the summary), so a number means the same
wherever it is printed. The names, for ``n`` problems with ``k`` completions each:

    answer_accuracy        share of all completions the grader accepts (greedy accuracy when k = 1)
    pass@k                 share of problems with at least one accepted completion (k > 1 only)
    format_accuracy        share of completions in the exact tag layout (the match_format_exactly reward)
    reasoning_present      share of completions with text before the reasoning end tag
    avg_reasoning_length   mean length of that text, in characters
    avg_completion_tokens  mean completion length, in tokens
    truncation_rate        share of completions cut at the token budget instead of ending
    avg_total_reward       mean weighted sum of the training rewards
    rewards                each reward's mean score
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..rollout import Completion
from .judge import CompletionJudge

# metadata the data layer keeps: MATH's subject/type and level; a reasoning-gym task's difficulty (its own values of
# the settings it varies, as JSON: {"num_terms": 3, "num_digits": 2})
BREAKDOWN_COLUMNS = ("subject", "level", "difficulty")


def score_problems(
    judge: CompletionJudge, problems: Any, groups: Sequence[Sequence[Completion]]
) -> list[dict[str, Any]]:
    """One row per problem (rows with a conversation ``prompt`` and a string ``answer``): its completions judged."""
    metadata = [column for column in BREAKDOWN_COLUMNS if column in _columns(problems)]
    return [
        _score_problem(judge, index, row, group, metadata)
        for index, (row, group) in enumerate(zip(problems, groups, strict=True))
    ]


def _score_problem(judge: CompletionJudge, index: int, row: dict, group: Sequence[Completion],
                   metadata: list[str]) -> dict[str, Any]:
    texts, gold = [c.text for c in group], str(row["answer"])
    correct = [judge.is_correct(text, row) for text in texts]
    scores = judge.row_scores(row, texts)
    return {
        "index": index,
        "prompt": row["prompt"][-1]["content"],
        "gold": gold,
        "completions": texts,
        "extracted_answers": [judge.answer(text) for text in texts],
        "correct": correct,
        "passed": any(correct),
        "formatted": judge.is_formatted(texts),
        "reasoning_lengths": [len(judge.reasoning(text)) for text in texts],
        "num_tokens": [c.num_tokens for c in group],
        "finished": [c.finished for c in group],
        "rewards": scores,
        "total_reward": judge.total_rewards(scores),
        **{column: row[column] for column in metadata},
    }


def figures(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary figures of scored problems (names in the module docstring)."""
    k = len(results[0]["completions"]) if results else 0
    reward_names = list(results[0]["rewards"]) if results else []
    summary: dict[str, Any] = {"n": len(results), "k": k, "answer_accuracy": _mean(results, "correct", 4)}
    if k > 1:
        summary[f"pass@{k}"] = _share([r["passed"] for r in results])
    summary.update(
        format_accuracy=_mean(results, "formatted", 4),
        reasoning_present=_share([length > 0 for r in results for length in r["reasoning_lengths"]]),
        avg_reasoning_length=_mean(results, "reasoning_lengths", 2),
        avg_completion_tokens=_mean(results, "num_tokens", 2),
        truncation_rate=round(1 - _mean(results, "finished", 6), 4) if results else 0.0,
        avg_total_reward=_mean(results, "total_reward", 4),
        rewards={name: round(statistics.mean(s for r in results for s in r["rewards"][name]), 4)
                 for name in reward_names},
    )
    return summary


def sample_answers(results: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The first completion of the first ``count`` scored problems, as a person reads it: the question, what
    the model wrote, the answer extracted from it, the gold answer, right or wrong, and each reward."""
    return [
        {
            "index": result["index"],
            "question": result["prompt"],
            "gold": result["gold"],
            "completion": result["completions"][0],
            "answer": result["extracted_answers"][0],
            "correct": result["correct"][0],
            "formatted": result["formatted"][0],
            "num_tokens": result["num_tokens"][0],
            "total_reward": result["total_reward"][0] if result["total_reward"] else 0.0,  # no rewards: 0
            "rewards": {name: scores[0] for name, scores in result["rewards"].items()},
        }
        for result in results[:count]
    ]


def breakdowns(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """The figures per value of each breakdown column the results carry (per subject, per level, per value of each
    difficulty setting: ``num_terms``, ``num_digits``)."""
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for column, members in _groups(results).items():
        tables[column] = {value: _short(figures(rows)) for value, rows in sorted(members.items())}
    return tables


def by_difficulty(greedy: Sequence[dict[str, Any]], sampled: Sequence[dict[str, Any]] | None = None,
                  ) -> dict[str, dict[str, dict[str, Any]]]:  # fmt: skip
    """Greedy (and sampled) answer accuracy per value of each difficulty setting: ``{"num_terms": {"2": {"n": 120,
    "answer_accuracy": 0.59, "sampled_answer_accuracy": 0.52}, "3": ...}}``; ``{}`` when the problems report none."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    greedy_groups = {k: v for k, v in _groups(greedy).items() if k not in ("subject", "level")}
    sampled_groups = _groups(sampled) if sampled else {}
    for setting, members in greedy_groups.items():
        table[setting] = {}
        for value, rows in sorted(members.items(), key=lambda item: _natural(item[0])):
            cell = {"n": len(rows), "answer_accuracy": _mean(rows, "correct", 4)}
            if sampled:
                cell["sampled_answer_accuracy"] = _mean(sampled_groups[setting][value], "correct", 4)
            table[setting][value] = cell
    return table


def _groups(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Results grouped per breakdown: column (a difficulty setting for ``difficulty``) -> value -> rows."""
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        for column in BREAKDOWN_COLUMNS:
            if column not in result or result[column] is None:
                continue
            if column == "difficulty":
                for setting, value in _settings(result[column]).items():
                    groups[setting][str(value)].append(result)
            else:
                groups[column][str(result[column])].append(result)
    return {column: dict(members) for column, members in groups.items()}


def _settings(text: Any) -> dict[str, Any]:
    try:
        settings = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _natural(value: str) -> tuple[int, float | str]:
    try:
        return 0, float(value)
    except ValueError:
        return 1, value


def _short(summary: dict[str, Any]) -> dict[str, Any]:
    keep = ("n", "answer_accuracy", "format_accuracy", f"pass@{summary['k']}", "avg_completion_tokens")
    return {key: summary[key] for key in keep if key in summary}


def _mean(results: Sequence[dict[str, Any]], key: str, digits: int) -> float:
    # statistics.mean is exact on bools and ints, so the same completions always give the same figure
    values = [value for r in results for value in r[key]]
    return round(float(statistics.mean(values)), digits) if values else 0.0


def _share(flags: Sequence[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0


def _columns(problems: Any) -> list[str]:
    names = getattr(problems, "column_names", None)
    return list(names) if names is not None else (list(problems[0]) if len(problems) else [])
