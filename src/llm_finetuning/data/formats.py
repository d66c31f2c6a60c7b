"""One small adapter per dataset schema, in a registry: raw row -> canonical ``Problem``.

Why: the processor should not know where a dataset came from. Each adapter reads one schema (the Hub
datasets the default recipe uses, MATH and GSM8K copies, our generator, reasoning-gym's tasks, or any
table through ``format: columns``) and returns the question, the final answer (``None`` when unusable:
the row is dropped and counted), the worked solution for SFT (``None`` when the schema has none) and
metadata columns kept for evaluation breakdowns (``level``, ``subject``...). Final answers are taken from
worked solutions and answer columns by the grader's own extraction (``llm_finetuning.grading``), so
the gold answer a model is scored against is read by the same rules as the model's answer.

    >>> ADAPTERS["gsm8k"].convert({"question": "2 + 2?", "answer": "2 + 2 = 4\\n#### 4"}, DatasetSpec()).answer
    '4'
    >>> ADAPTERS["math"].convert({"problem": "P", "answer": "7", "level": "Level 3"}, DatasetSpec()).metadata
    {'level': '3'}
    >>> last_boxed(r"so $\\boxed{\\frac{1}{2}}$.")
    '\\\\frac{1}{2}'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import DatasetSpec
from ..errors import DataError
from ..grading.extract import gold_answer, is_numeric, last_boxed
from ..tasks import gym
from ..tasks.workings import WORKINGS, gsm8k_answer, gsm8k_working

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "ADAPTERS",
    "FormatAdapter",
    "Problem",
    "detect_format",
    "is_numeric",
    "last_boxed",
    "resolve_adapter",
    "strip_answer_instruction",
]

logger = logging.getLogger(__name__)


@dataclass
class Problem:
    """A row in the canonical schema every adapter produces."""

    question: str
    answer: str | None  # None = no usable final answer (the row is dropped and counted)
    reasoning: str | None = None  # worked solution without answer markup (SFT); None = the schema has none
    metadata: dict[str, Any] = field(default_factory=dict)  # extra columns kept on the processed rows
    reasoning_agrees: bool = True  # False: the worked solution reaches another answer (dropped from SFT)


@dataclass(frozen=True)
class FormatAdapter:
    """How to read one schema: the columns that identify it and the row converter."""

    name: str
    signatures: tuple[tuple[str, ...], ...]  # column sets that identify the schema (auto detection, in order)
    convert: Callable[[dict[str, Any], DatasetSpec], Problem]
    has_reasoning: bool  # rows carry a worked solution, so the schema can be SFT data
    heldout_column: str | None = None  # column marking held-out rows ("eval"), used instead of a random split
    report: Callable[[Dataset, DatasetSpec], None] | None = None  # logs what the adapter will change
    checks_reasoning: bool = False  # rows say whether their worked solution reaches the answer (SFT stage)
    sft_refusal: Callable[[DatasetSpec], str | None] | None = None  # why this spec cannot be SFT data

    def required_columns(self, spec: DatasetSpec, columns: Sequence[str] = ()) -> list[str]:
        """The columns this schema needs: the signature that ``columns`` comes closest to."""
        if self.name == "columns":
            return [spec.question_column, spec.answer_column] + (
                [spec.solution_column] if spec.solution_column else []
            )
        return list(min(self.signatures, key=lambda signature: len(set(signature) - set(columns))))


def _clean(text: Any) -> str:
    return "" if text is None else str(text).strip()


def _answer_or_none(text: Any) -> str | None:
    return _clean(text) or None


def _breakdown(row: dict[str, Any]) -> dict[str, Any]:
    """``level`` and ``subject`` (MATH's ``type``) for evaluation breakdowns, when the row has them;
    a level is reported as ``3`` whether written ``"Level 3"`` (hendrycks copies) or ``3`` (MATH-500)."""
    metadata: dict[str, Any] = {}
    if "level" in row:
        metadata["level"] = re.sub(r"^level\s*", "", _clean(row["level"]), flags=re.IGNORECASE)
    if "subject" in row or "type" in row:
        metadata["subject"] = _clean(row.get("subject", row.get("type")))
    return metadata


def _openmathreasoning(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    thoughts = _clean(row["generated_solution"]).replace("<think>", "").replace("</think>", "").strip()
    return Problem(_clean(row["problem"]), _answer_or_none(row["expected_answer"]), thoughts or None)


# DAPO's own answer instruction around each problem (open-r1/DAPO-Math-17k-Processed keeps it in
# ``prompt``). Under our system prompt it would ask for a second answer format, so it is stripped
# unless ``keep_answer_instruction`` is set.
_DAPO_LEAD = re.compile(
    r"^\s*Solve the following math problem step by step\.\s*The last line of your response should be of "
    r"the form Answer: \$Answer \(without quotes\) where \$Answer is the answer to the problem\.\s*"
)
_DAPO_TAIL = re.compile(r'\s*Remember to put your answer on its own line after "Answer:"\.?\s*$')


def strip_answer_instruction(prompt: str) -> tuple[str, bool]:
    """``prompt`` without DAPO's answer instruction, and whether it had one.

    >>> strip_answer_instruction('Solve the following math problem step by step. The last line of your '
    ...     'response should be of the form Answer: $Answer (without quotes) where $Answer is the answer '
    ...     'to the problem.\\n\\nWhat is 2+2?\\n\\nRemember to put your answer on its own line after "Answer:".')
    ('What is 2+2?', True)
    """
    stripped = _DAPO_TAIL.sub("", _DAPO_LEAD.sub("", prompt, count=1), count=1)
    return stripped.strip(), stripped != prompt


def _dapo(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    question = _clean(row["prompt"])
    if not spec.keep_answer_instruction:
        question = strip_answer_instruction(question)[0]
    return Problem(question, _answer_or_none(row["solution"]))  # DAPO's "solution" is the final answer


def _report_dapo(dataset: Dataset, spec: DatasetSpec) -> None:
    prompts = dataset["prompt"]
    found = sum(strip_answer_instruction(str(p or ""))[1] for p in prompts)
    action = "kept (keep_answer_instruction: true)" if spec.keep_answer_instruction else "stripped"
    logger.info(
        "%s: DAPO's answer instruction found in %d of %d prompts; %s", spec.name, found, len(prompts), action
    )


def _gsm8k(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    """GSM8K (``… #### 72``), or a question/answer table whose answer is a bare answer; text without
    ``####`` that reads as prose (a worked solution cut short) has no usable answer."""
    solution = _clean(row["answer"])
    working = gsm8k_working(solution)
    answer = working.answer if "####" in solution or _bare_answer(solution) else None
    metadata = {"reference_solution": solution, **_breakdown(row)}
    return Problem(_clean(row["question"]), answer, working.text or None, metadata)


def _bare_answer(text: str) -> bool:
    """One line that is math or a few words (``72``, ``\\frac{1}{2}``, ``Monday``), not a sentence."""
    return "\n" not in text and (len(text.split()) <= 3 or re.search(r"[\d\\$=]", text) is not None)


def _math(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    solution = _clean(row.get("solution"))
    answer = _gold(row.get("answer")) or last_boxed(solution)
    metadata = ({"reference_solution": solution} if "solution" in row else {}) | _breakdown(row)
    return Problem(_clean(row["problem"]), answer, solution or None, metadata)


def _gold(text: Any) -> str | None:
    return gold_answer(_clean(text)) if _clean(text) else None


def _numina(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    solution = _clean(row["solution"])
    return Problem(
        _clean(row["problem"]), last_boxed(solution), solution or None, {"reference_solution": solution}
    )


def _columns(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    answer = gsm8k_answer(_clean(row[spec.answer_column])) if _clean(row[spec.answer_column]) else None
    reasoning = (_clean(row[spec.solution_column]) or None) if spec.solution_column else None
    return Problem(_clean(row[spec.question_column]), answer, reasoning)


def _synthetic(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    metadata = {"split": row["split"], "subject": row["operations"], "kind": row["kind"]}
    return Problem(_clean(row["question"]), _answer_or_none(row["answer"]), _clean(row["solution"]), metadata)


def _reasoning_gym(row: dict[str, Any], spec: DatasetSpec) -> Problem:
    """A generated reasoning-gym row (``tasks/gym_rows.py``): its worked solution, if the task has one, and
    the entry's reference, which the ``reasoning_gym`` reward scores against."""
    keep = ("split", "task", "template", gym.ENTRY_COLUMN, "difficulty")
    return Problem(
        _clean(row["question"]),
        _answer_or_none(row["answer"]),
        _clean(row["working"]) or None,
        {key: row[key] for key in keep if key in row},
        reasoning_agrees=bool(row["working_agrees"]),
    )


def _reasoning_gym_sft_refusal(spec: DatasetSpec) -> str | None:
    task = gym.task_of(spec.name)
    if task in WORKINGS:
        return None
    return (
        f"the project has no worked solutions for reasoning-gym's {task}, so it cannot be SFT data; "
        f"use a task that has them ({', '.join(sorted(WORKINGS))}) or other SFT data (GRPO takes any task)"
    )


# Auto detection tries these in order, so a schema whose signature contains another's comes first.
ADAPTERS: dict[str, FormatAdapter] = {
    adapter.name: adapter
    for adapter in [
        FormatAdapter(
            "reasoning_gym",
            (("question", "answer", "working", "working_agrees", "split", gym.ENTRY_COLUMN),),
            _reasoning_gym,
            has_reasoning=True,
            heldout_column="split",
            checks_reasoning=True,
            sft_refusal=_reasoning_gym_sft_refusal,
        ),
        FormatAdapter(
            "synthetic",
            (("question", "answer", "solution", "split", "operations", "kind"),),
            _synthetic,
            has_reasoning=True,
            heldout_column="split",
        ),
        FormatAdapter(
            "openmathreasoning",
            (("problem", "generated_solution", "expected_answer"),),
            _openmathreasoning,
            has_reasoning=True,
        ),
        FormatAdapter("numina", (("problem", "solution", "messages"),), _numina, has_reasoning=True),
        # MATH copies (problem, solution[, answer], level, type/subject) and MATH-500-like eval files
        # (problem, answer[, subject, level]) without worked solutions
        FormatAdapter("math", (("problem", "solution"), ("problem", "answer")), _math, has_reasoning=True),
        FormatAdapter("dapo", (("prompt", "solution"),), _dapo, has_reasoning=False, report=_report_dapo),
        # GSM8K (answer "... #### 72") and any question/answer table (a bare answer)
        FormatAdapter("gsm8k", (("question", "answer"),), _gsm8k, has_reasoning=True),
        FormatAdapter("columns", (), _columns, has_reasoning=True),
    ]
}


def detect_format(columns: Sequence[str]) -> str | None:
    """The first schema one of whose signatures is all present in ``columns``, or ``None``."""
    for adapter in ADAPTERS.values():
        if any(set(signature) <= set(columns) for signature in adapter.signatures):
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
    missing = [column for column in adapter.required_columns(spec, columns) if column not in columns]
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
    return "; ".join(
        f"{a.name} ({' or '.join(', '.join(s) for s in a.signatures)})"
        for a in ADAPTERS.values()
        if a.signatures
    )
