"""Worked solutions for SFT: GSM8K-style solutions read into our format, and ones the project writes itself.

A ``Working`` is the reasoning that goes between the tags and the answer that reasoning reaches. The SFT
completion puts the dataset's own answer in ``<SOLUTION>``; a working whose answer disagrees with it (a
sloppy generated solution) is dropped and counted (the ``solution_agrees`` stage), never taught.

- GSM8K style (``… #### 1,234``; the ``gsm8k`` format and reasoning-gym's ``gsm_symbolic``, whose entries
  carry one in ``metadata["answer_cot"]``): the text before the last ``####`` without ``<<48/2=24>>``
  calculator notes is the working, the ``####`` line the answer it reaches.
- Arithmetic expressions (reasoning-gym's ``chain_sum`` and ``basic_arithmetic``, whose entries carry the
  expression in ``metadata["expression"]``): one line per operation, in the order Python evaluates the
  expression (left to right, each operation once its operands are known), so a chain of sums is a running
  sum and a product is worked out before the sum that uses it; correct by construction.
  ``basic_arithmetic`` writes ``/`` for floor division (it evaluates ``//``), so the working does too.

``WORKINGS`` maps a reasoning-gym task to its worked solution; a task that is not there has none (GRPO
can still use it).

    >>> expression_working("12 + 5 - 3 * 2")
    Working(text='12 + 5 = 17\\n3 * 2 = 6\\n17 - 6 = 11', answer='11')
    >>> gsm8k_working("Half of 48 is 48/2 = <<48/2=24>>24.\\n#### 24")
    Working(text='Half of 48 is 48/2 = 24.', answer='24')
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..grading.extract import gold_answer, parse_number
from ..grading.normalize import without_thousands

__all__ = ["WORKINGS", "Working", "agrees", "expression_working", "gsm8k_answer", "gsm8k_working"]


@dataclass(frozen=True)
class Working:
    """A worked solution: the reasoning text, and the answer it reaches (``None`` when it states none)."""

    text: str
    answer: str | None


def gsm8k_answer(solution: str) -> str | None:
    """The answer of a GSM8K-style answer column (``… #### 1,234`` or a bare answer), thousands
    separators dropped so the SFT target and the string-matching rewards see ``1234``."""
    answer = gold_answer(solution)
    return without_thousands(answer) if answer else None


def gsm8k_working(solution: str) -> Working:
    """A GSM8K-style solution: the text before the last ``####`` without calculator notes, and its answer
    (the text has no working when there is no ``####``)."""
    if "####" not in solution:
        return Working("", gsm8k_answer(solution))
    text = re.sub(r"<<[^>]*>>", "", solution.rsplit("####", 1)[0]).strip()
    return Working(text, gsm8k_answer(solution))


_OPERATORS: dict[type, tuple[str, Callable[[int, int], int]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.floordiv),  # basic_arithmetic evaluates "/" as "//"
}


def expression_working(expression: str) -> Working | None:
    """One line per operation of an integer expression (``+ - * /``, parentheses, negation), in evaluation
    order; ``None`` for anything else (a division by zero, a name, a float)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
        steps: list[str] = []
        value = _reduce(tree, steps)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None
    return Working("\n".join(steps) or f"{expression.strip()} = {value}", str(value))


def _reduce(node: ast.AST, steps: list[str]) -> int:
    """The value of ``node``, appending a line for each operation it needs."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        if isinstance(node.operand, ast.Constant):  # a negative number, not an operation
            return -_reduce(node.operand, steps)
        inner = _reduce(node.operand, steps)
        steps.append(f"-({inner}) = {-inner}")
        return -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _reduce(node.left, steps), _reduce(node.right, steps)
        symbol, apply = _OPERATORS[type(node.op)]
        value = apply(left, right)
        shown = f"({right})" if right < 0 else str(right)  # "12 - (-5)", not "12 - -5"
        steps.append(f"{left} {symbol} {shown} = {value}")
        return value
    raise ValueError(f"not an integer expression: {ast.dump(node)[:60]}")


def agrees(reached: str | None, answer: str | None) -> bool:
    """Whether a working's answer is the dataset's answer: equal as numbers, else as stripped text."""
    if reached is None or answer is None:
        return False
    a, b = parse_number(reached), parse_number(answer)
    return a == b if a is not None and b is not None else reached.strip() == answer.strip()


def _gsm_symbolic(entry: dict[str, Any]) -> Working | None:
    cot = str(entry.get("metadata", {}).get("answer_cot") or "")
    return gsm8k_working(cot) if "####" in cot else None


def _expression_entry(entry: dict[str, Any]) -> Working | None:
    expression = entry.get("metadata", {}).get("expression")
    return expression_working(str(expression)) if expression else None


# reasoning-gym task -> its worked solution from an entry (None: this entry has none)
WORKINGS: dict[str, Callable[[dict[str, Any]], Working | None]] = {
    "gsm_symbolic": _gsm_symbolic,
    "chain_sum": _expression_entry,
    "basic_arithmetic": _expression_entry,
}
