"""One small adapter per dataset schema, in a registry: raw row -> canonical ``Problem``.

Why: the processor should not know where a dataset came from. Each adapter reads one schema (Hub datasets
the seeds use, our generator, or any table through ``format: columns``) and returns the question, the final
answer (``None`` when unusable: the row is dropped and counted), the worked solution for SFT (``None`` when
the schema has none) and metadata columns kept for evaluation breakdowns (``level``, ``subject``...).

    >>> ADAPTERS["gsm8k"].convert({"question": "2 + 2?", "answer": "2 + 2 = 4\\n#### 4"}, DatasetSpec()).answer
    '4'
    >>> last_boxed(r"so $\\boxed{\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import DatasetSpec
from ..errors import DataError

__all__ = [
    "ADAPTERS",
    "FormatAdapter",
    "Problem",
    "detect_format",
    "is_numeric",
    "last_boxed",
    "resolve_adapter",
]

logger = logging.getLogger(__name__)


@dataclass
class Problem:
    """A row in the canonical schema every adapter produces."""

    question: str
    answer: str | None  # None = no usable final answer (the row is dropped and counted)
    reasoning: str | None = None  # worked solution without answer markup (SFT); None = the schema has none
    metadata: dict[str, Any] = field(default_factory=dict)  # extra columns kept on the processed rows


@dataclass(frozen=True)
class FormatAdapter:
    """How to read one schema: the columns that identify it and the row converter."""

    name: str
    signature: tuple[str, ...]  # columns whose presence identifies the schema (auto detection, in order)
    convert: Callable[[dict[str, Any], DatasetSpec], Problem]
    has_reasoning: bool  # rows carry a worked solution, so the schema can be SFT data
    heldout_column: str | None = None  # column marking held-out rows ("eval"), used instead of a random split

    def required_columns(self, spec: DatasetSpec) -> list[str]:
        if self.name == "columns":
            return [spec.question_column, spec.answer_column] + (
                [spec.solution_column] if spec.solution_column else []
            )
        return list(self.signature)


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (nested braces allowed), or ``None``.

    >>> last_boxed(r"\boxed{1} then \boxed{x^{2}}")
    'x^{2}'
    """
    matches = list(_BOXED.finditer(text))
    if not matches:
        return None
    position = matches[-1].end()
    if not text.startswith("{", position):
        bare = re.match(r"[^\s$]+", text[position:])  # the "\boxed 5" form
        return bare.group(0) if bare else None
    depth = 0
    for index in range(position, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[position + 1 : index].strip() or None
    return None  # unbalanced braces


def is_numeric(answer: str) -> bool:
    """A finite number, thousands separators allowed ("1,234", "-0.5", "3e4"); the SFT filter's rule."""
    try:
        return math.isfinite(float(answer.replace(",", "").strip()))
    except ValueError:
        return False


def _gsm8k_answer(solution: str) -> str | None:
    if "####" not in solution:
        return None
    answer = solution.rsplit("####", 1)[1].strip().replace(",", "").rstrip(".")
    return answer or None


def _clean(text: Any) -> str:
    return "" if text is None else str(text).strip()


def _answer_or_none(text: Any) -> str | None:
    return _clean(text) or None


def _openmathreasoning(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    thoughts = _clean(row["generated_solution"]).replace("<think>", "").replace("</think>", "").strip()
    return Problem(_clean(row["problem"]), _answer_or_none(row["expected_answer"]), thoughts or None)


def _dapo(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    return Problem(_clean(row["prompt"]), _answer_or_none(row["solution"]))  # the seed's solution -> answer


def _gsm8k(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    solution = _clean(row["answer"])
    working = re.sub(r"<<[^>]*>>", "", solution.rsplit("####", 1)[0]).strip()  # drop calculator notes
    return Problem(
        _clean(row["question"]), _gsm8k_answer(solution), working or None, {"reference_solution": solution}
    )


def _math(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    solution = _clean(row["solution"])
    answer = _answer_or_none(row.get("answer")) or last_boxed(solution)
    metadata: dict[str, Any] = {"reference_solution": solution}
    if "level" in row:
        metadata["level"] = str(row["level"])
    if "subject" in row or "type" in row:
        metadata["subject"] = _clean(row.get("subject", row.get("type")))
    return Problem(_clean(row["problem"]), answer, solution or None, metadata)


def _numina(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    solution = _clean(row["solution"])
    return Problem(
        _clean(row["problem"]), last_boxed(solution), solution or None, {"reference_solution": solution}
    )


def _columns(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    raw_answer = _clean(row[spec.answer_column])
    answer = last_boxed(raw_answer) or _gsm8k_answer(raw_answer) or raw_answer or None
    reasoning = (_clean(row[spec.solution_column]) or None) if spec.solution_column else None
    return Problem(_clean(row[spec.question_column]), answer, reasoning)


def _synthetic(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    metadata = {"split": row["split"], "subject": row["operations"], "kind": row["kind"]}
    return Problem(_clean(row["question"]), _answer_or_none(row["answer"]), _clean(row["solution"]), metadata)


# Auto detection tries these in order, so a schema whose signature contains another's comes first.
ADAPTERS: dict[str, FormatAdapter] = {
    adapter.name: adapter
    for adapter in [
        FormatAdapter(
            "synthetic",
            ("question", "answer", "solution", "split", "operations", "kind"),
            _synthetic,
            has_reasoning=True,
            heldout_column="split",
        ),
        FormatAdapter(
            "openmathreasoning",
            ("problem", "generated_solution", "expected_answer"),
            _openmathreasoning,
            has_reasoning=True,
        ),
        FormatAdapter("numina", ("problem", "solution", "messages"), _numina, has_reasoning=True),
        FormatAdapter("math", ("problem", "solution"), _math, has_reasoning=True),
        FormatAdapter("dapo", ("prompt", "solution"), _dapo, has_reasoning=False),
        FormatAdapter("gsm8k", ("question", "answer"), _gsm8k, has_reasoning=True),
        FormatAdapter("columns", (), _columns, has_reasoning=True),
    ]
}


def detect_format(columns: Sequence[str]) -> str | None:
    """The first schema whose signature columns are all present, or ``None``."""
    for adapter in ADAPTERS.values():
        if adapter.signature and set(adapter.signature) <= set(columns):
            return adapter.name
    return None


def resolve_adapter(spec: DatasetSpec, columns: Sequence[str]) -> FormatAdapter:
    """The adapter for ``spec.format`` (detected when ``auto``), after checking the columns it needs."""
    name = spec.format
    if name == "auto":
        name = detect_format(columns)
        if name is None:
            raise DataError(
                f"{spec.name}: cannot tell the dataset format from its columns {list(columns)}; "
                f"set format to one of {_signatures()}, or format: columns with question_column/"
                "answer_column"
            )
        logger.info("%s: detected format '%s' from columns %s", spec.name, name, list(columns))
    adapter = ADAPTERS[name]
    missing = [column for column in adapter.required_columns(spec) if column not in columns]
    if missing:
        fix = (
            "set question_column/answer_column/solution_column to columns that exist"
            if name == "columns"
            else "set format to the matching schema, or format: columns with question_column/answer_column"
        )
        raise DataError(
            f"{spec.name}: format '{name}' needs columns {missing} but the dataset has {list(columns)}; {fix}"
        )
    return adapter


def _signatures() -> str:
    return "; ".join(f"{a.name} ({', '.join(a.signature)})" for a in ADAPTERS.values() if a.signature)
