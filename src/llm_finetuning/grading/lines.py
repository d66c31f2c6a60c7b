"""Where a worked solution went wrong, from its final answer alone: each working line read as an equation of
integer expressions and checked (``LINE_CHECKS``); GRPO's ``line_credit`` (``training/line_credit.py``) puts the
advantage there.

- a line is read as an equation of integer expressions (``44 - 84 + 75 = -40 + 75``: digits, ``+ - *``,
  parentheses); a line that is not one (prose, a tag, a division) is neither accepted nor rejected; bounded on
  any output (``MAX_LINE`` characters, ``MAX_DIGITS`` digits a number);
- a registered check finds the first wrong side of each readable line against the row's final answer, the only
  thing an answer-only row holds: ``equations`` (its sides are equal), ``equal_to_answer`` (every side is the
  answer: a working that rewrites the expression one operation a line keeps its value, so a dropped term or a
  wrong sum shows on the line where it happens).

The working is the text before ``working_end`` (the prompt's ``reasoning_end``), or before ``answer_start`` where
that tag is missing.

    >>> credit_span("4 + 3 - 2 = 7 - 2\\n7 - 2 = 4<end_working_out>", "5", "equal_to_answer", "<end_working_out>")
    CreditSpan(right_until=26, wrong_from=26)
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from .extract import parse_number

__all__ = ["LINE_CHECKS", "CreditSpan", "credit_span", "equation_sides"]

MAX_LINE = 200  # characters: a longer line is not read (the check stays bounded on any output)
MAX_DIGITS = 30  # a longer number is not read: products of readable lines stay small
_EQUATION = re.compile(r"[0-9+\-*() ]+(?:=[0-9+\-*() ]+)+")
_OPERATORS: dict[type, Callable[[int, int], int]] = {ast.Add: operator.add, ast.Sub: operator.sub,
                                                     ast.Mult: operator.mul}  # fmt: skip


@dataclass(frozen=True)
class CreditSpan:
    """Where a completion's working was right and where it went wrong, in characters of its text (or tokens):
    everything before ``right_until`` was accepted (0: nothing), and ``wrong_from`` starts the first wrong side
    of its first rejected line (``None``: none was)."""

    right_until: int
    wrong_from: int | None


def _value(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("not an integer expression")


def equation_sides(line: str) -> list[int] | None:
    """The values of a line's ``=``-separated integer expressions (two or more), or ``None`` where the line is not
    such an equation.

    >>> equation_sides("-40 + 75 = 35"), equation_sides("4+3+1=08"), equation_sides("So it is 35."), equation_sides("7 =")
    ([35, 35], [8, 8], None, None)
    """
    text = line.strip()
    if len(text) > MAX_LINE or not _EQUATION.fullmatch(text) or re.search(rf"\d{{{MAX_DIGITS + 1}}}", text):
        return None
    text = re.sub(r"(?<!\d)0+(?=\d)", "", text)  # "08", a column's sum with its carry, is 8
    try:
        return [_value(ast.parse(side.strip(), mode="eval").body) for side in text.split("=")]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _first_unequal(sides: list[int], answer: int | None) -> int | None:
    return next((index for index, side in enumerate(sides) if side != sides[0]), None)


def _first_not_the_answer(sides: list[int], answer: int | None) -> int | None:
    return 0 if answer is None else next((index for index, side in enumerate(sides) if side != answer), None)


# check name -> (a readable line's sides, the row's answer as an integer, None where it is not one) -> the first
# of the sides that is wrong (None: none is)
LINE_CHECKS: dict[str, Callable[[list[int], int | None], int | None]] = {
    "equations": _first_unequal,
    "equal_to_answer": _first_not_the_answer,
}


def _side_starts(line: str) -> list[int]:
    """Where each ``=``-separated side of ``line`` starts (its first character that is not a space)."""
    starts, offset = [], 0
    for side in line.split("="):
        starts.append(offset + len(side) - len(side.lstrip()))
        offset += len(side) + 1
    return starts


def credit_span(text: str, answer: str, check: str, working_end: str, answer_start: str = "") -> CreditSpan:
    """The working's checked lines (module docstring) as a ``CreditSpan`` of ``text``'s characters: a rejected
    line is right up to its first wrong side (``4 + 3 - 2 = 6 - 2`` went wrong at ``6``, not at ``4``)."""
    end = text.find(working_end)
    if end < 0 and answer_start:
        end = text.find(answer_start)
    working = text if end < 0 else text[:end]
    number = parse_number(answer)
    value = int(number) if number is not None and number.is_integer() else None
    first_wrong, right_until, start = LINE_CHECKS[check], 0, 0
    for line in working.split("\n"):
        sides = equation_sides(line)
        if sides is not None:
            wrong = first_wrong(sides, value)
            if wrong is not None:
                at = start + _side_starts(line)[wrong]
                return CreditSpan(at if wrong else right_until, at)
            right_until = start + len(line.rstrip())
        start += len(line) + 1
    return CreditSpan(right_until, None)
