"""Credit by working line: ``grpo_training.line_credit``. A wrong answer's advantage lands where its working
went wrong, not on the lines before that were right.

GRPO's advantage is one number a completion, and every token of it is pushed by it. A wrong answer to a five-term
sum is mostly right lines (three right operations, one wrong, the rest carried from it): the sequence-level push
lowers the right operations with the wrong one, and over a run the arithmetic the model had degrades with the
answers it got wrong (measured in docs/benchmarks.md, "Beyond a converged SFT model"). Where the working's lines
can be checked one at a time without a worked solution, the step can say which line went wrong:

- a line is read as an equation of integer expressions (``44 - 84 + 75 = -40 + 75``: digits, ``+ - *``,
  parentheses); a line that is not one (prose, a tag, a division) is neither accepted nor rejected;
- a registered check (``LINE_CHECKS``) finds the first wrong side of each readable line against the row's final
  answer, the only thing an answer-only row holds: ``equations`` (its sides are equal), ``equal_to_answer`` (every side
  is the answer: a working that rewrites the expression one operation a line keeps its value, so a dropped term or
  a wrong sum shows on the line where it happens);
- in a completion whose advantage is negative, the tokens before its first wrong side (of its first rejected line:
  in ``4 + 3 - 2 = 6 - 2`` the ``6 - 2``) carry no advantage (and, where no line is rejected, those up to the end
  of its last accepted line: the error is in what follows, the answer or a stop); in one whose advantage is
  positive, the tokens from that side on carry none (a right answer reached through a wrong line is not taught
  there). The advantages become per token; the loss's
  normaliser is unchanged, so a masked token counts as a token that taught nothing.

The working is the text before ``reasoning_end`` (the prompt's tag), or before ``solution_start`` where the tag is
missing. Token offsets come from decoding each completion token alone; a completion whose pieces do not add up to
its text (bytes of one character split over tokens) keeps its sequence-level advantage.

    >>> credit_span("4 + 3 - 2 = 7 - 2\\n7 - 2 = 4<end_working_out>", "5", "equal_to_answer", "<end_working_out>")
    CreditSpan(right_until=26, wrong_from=26)
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the config's check reads LINE_CHECKS: loading a config does not import torch
    import torch

__all__ = ["LINE_CHECKS", "CreditSpan", "credit_span", "equation_sides", "token_advantages", "token_ends"]

MAX_LINE = 200  # characters: a longer line is not read (the check stays bounded on any output)
MAX_DIGITS = 30  # a longer number is not read: products of readable lines stay small
_EQUATION = re.compile(r"[0-9+\-*() ]+(?:=[0-9+\-*() ]+)+")
_OPERATORS: dict[type, Callable[[int, int], int]] = {ast.Add: operator.add, ast.Sub: operator.sub,
                                                     ast.Mult: operator.mul}  # fmt: skip


@dataclass(frozen=True)
class CreditSpan:
    """Where a completion's working was right and where it went wrong, in characters of its text (or tokens):
    everything before ``right_until`` was accepted (0: nothing), and ``wrong_from`` starts its first rejected
    line (``None``: none was)."""

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


def _answer_value(answer: str) -> int | None:
    try:
        return int(answer.strip().replace(",", ""))
    except ValueError:
        return None


def _first_unequal(sides: list[int], answer: str) -> int | None:
    return next((index for index, side in enumerate(sides) if side != sides[0]), None)


def _first_not_the_answer(sides: list[int], answer: str) -> int | None:
    value = _answer_value(answer)
    return 0 if value is None else next((index for index, side in enumerate(sides) if side != value), None)


# check name -> (a readable line's sides, the row's answer) -> the first of the sides that is wrong (None: none is)
LINE_CHECKS: dict[str, Callable[[list[int], str], int | None]] = {
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
    first_wrong, right_until, start = LINE_CHECKS[check], 0, 0
    for line in working.split("\n"):
        sides = equation_sides(line)
        if sides is not None:
            wrong = first_wrong(sides, answer)
            if wrong is not None:
                at = start + _side_starts(line)[wrong]
                return CreditSpan(at if wrong else right_until, at)
            right_until = start + len(line.rstrip())
        start += len(line) + 1
    return CreditSpan(right_until, None)


def token_ends(ids: Sequence[int], tokenizer: Any) -> list[int] | None:
    """The character offset where each of ``ids``'s tokens ends in their decoded text, or ``None`` where tokens
    decoded alone do not add up to that text."""
    ids = [int(token) for token in ids]
    pieces = [tokenizer.decode([token], skip_special_tokens=True) for token in ids]
    if "".join(pieces) != tokenizer.decode(ids, skip_special_tokens=True):
        return None
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    return ends


def in_tokens(span: CreditSpan, ends: list[int] | None) -> CreditSpan:
    """``span`` in tokens: the tokens wholly before ``right_until``, the first token reaching past ``wrong_from``
    (a ``CreditSpan(0, None)``, no credit moved, where ``ends`` is ``None``)."""
    if ends is None:
        return CreditSpan(0, None)
    right = sum(1 for end in ends if end <= span.right_until)
    wrong = None if span.wrong_from is None else sum(1 for end in ends if end <= span.wrong_from)
    return CreditSpan(right, wrong)


def token_advantages(advantages: torch.Tensor, spans: Sequence[CreditSpan], length: int) -> torch.Tensor:
    """``advantages`` (one a completion) as ``(completions, length)`` advantages per token, each row's ``span``
    (in tokens) applied: a negative row's accepted tokens carry 0, a positive row's tokens from its first rejected
    line on carry 0."""
    per_token = advantages.unsqueeze(1).repeat(1, length)
    for row, (advantage, span) in enumerate(zip(advantages.tolist(), spans, strict=True)):
        if advantage < 0:
            per_token[row, : span.right_until] = 0.0
        elif advantage > 0 and span.wrong_from is not None:
            per_token[row, span.wrong_from :] = 0.0
    return per_token


def figures(advantages: torch.Tensor, spans: Sequence[CreditSpan], mask: torch.Tensor) -> dict[str, float]:
    """What the credit moved this step: the share of the negative rows' tokens left without advantage, and the
    share of negative rows with a rejected line."""
    negative = [row for row, value in enumerate(advantages.tolist()) if value < 0]
    if not negative:
        return {}
    lengths = mask.sum(dim=1).tolist()
    tokens = sum(lengths[row] for row in negative)
    freed = sum(min(spans[row].right_until, lengths[row]) for row in negative)
    located = sum(spans[row].wrong_from is not None for row in negative)
    return {"line_credit/negative_tokens_freed": freed / max(tokens, 1),
            "line_credit/negative_rows_located": located / len(negative)}  # fmt: skip
