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
  Two styles (``data.reasoning_gym.working``): ``lines`` writes each operation alone (``6 - 0 = 6``,
  ``6 + 5 = 11``); ``rewrite`` writes, on each line, the whole expression left with its first operation done
  (``6 - 0 + 5 = 6 + 5``, ``6 + 5 = 11``), so the terms still to add stay in sight and the working cannot end
  while one is left. ``columns`` is ``rewrite`` with each operation worked digit by digit (``column_working``):
  the expression left on a line of its own, then the operation on the magnitudes it comes to (``44 - 84`` is
  ``-(84 - 44)``, ``-37 + 58`` is ``58 - 37``), a column a step with its carry or borrow, and its value:

      44 - 84 + 75
      44-84 = -(84-44): 4-4-0=0 8-4-0=4 =-40
      -40 + 75
      -40+75 = 75-40: 5-0-0=5 7-4-0=3 =35
      35

  so a two-digit sum or difference, or one with a negative number, becomes a chain of one-digit steps the
  model sees thousands of times. ``rewrite`` and ``columns`` apply to flat chains of ``+`` and ``-``
  (chain_sum); anything else keeps ``lines``.

``WORKINGS`` maps a reasoning-gym task to its worked solution; a task that is not there has none (GRPO
can still use it).

    >>> expression_working("12 + 5 - 3 * 2")
    Working(text='12 + 5 = 17\\n3 * 2 = 6\\n17 - 6 = 11', answer='11')
    >>> expression_working("6 - 0 + 5", style="rewrite")
    Working(text='6 - 0 + 5 = 6 + 5\\n6 + 5 = 11', answer='11')
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

__all__ = [
    "STYLES",
    "WORKED_COLUMN",
    "WORKINGS",
    "Working",
    "agrees",
    "column_working",
    "expression_working",
    "gsm8k_answer",
    "gsm8k_working",
]

STYLES = ("lines", "rewrite", "columns")  # how an arithmetic expression is worked (module docstring)
# GRPO rows under grpo_training.guidance, or with a reward that reads it (check_working): the SFT completion of
# the row's worked solution, "" where it has none
WORKED_COLUMN = "worked_completion"


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


def expression_working(expression: str, style: str = "lines") -> Working | None:
    """One line per operation of an integer expression (``+ - * /``, parentheses, negation), in evaluation
    order, in ``style`` (module docstring); ``None`` for anything else (a division by zero, a name, a float)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
        chain = _flat_chain(tree) if style in ("rewrite", "columns") else None
        if chain is not None:
            return _rewrite(chain) if style == "rewrite" else _columns(chain)
        steps: list[str] = []
        value = _reduce(tree, steps)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None
    return Working("\n".join(steps) or f"{expression.strip()} = {value}", str(value))


def _flat_chain(node: ast.AST) -> list[tuple[str, int]] | None:
    """``a + b - c`` as ``[("+", a), ("+", b), ("-", c)]``: non-negative literals joined by ``+`` and ``-`` only
    (evaluated left to right); ``None`` for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
        return [("+", node.value)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left = _flat_chain(node.left)
        right = node.right
        if left is None or not (isinstance(right, ast.Constant) and type(right.value) is int and right.value >= 0):
            return None
        return [*left, ("+" if isinstance(node.op, ast.Add) else "-", right.value)]
    return None


def _rewrite(chain: list[tuple[str, int]]) -> Working:
    """Each line: the expression left, ``=``, the same with its first operation done."""
    lines, value, rest = [], chain[0][1], chain[1:]
    if not rest:
        return Working(f"{value} = {value}", str(value))
    while rest:
        before = _chain_text(value, rest)
        sign, term = rest[0]
        value = value + term if sign == "+" else value - term
        rest = rest[1:]
        lines.append(f"{before} = {_chain_text(value, rest)}")
    return Working("\n".join(lines), str(value))


def _columns(chain: list[tuple[str, int]]) -> Working:
    """The expression left, then its first operation worked on magnitudes, column by column (module docstring)."""
    value, rest = chain[0][1], chain[1:]
    lines = [_chain_text(value, rest)]
    while rest:
        (sign, term), rest = rest[0], rest[1:]
        lines.append(_signed_operation(value, sign, term))
        value = value + term if sign == "+" else value - term
        lines.append(_chain_text(value, rest))
    return Working("\n".join(lines), str(value))


def _signed_operation(value: int, sign: str, term: int) -> str:
    """``value sign term`` (``term`` >= 0) as the addition or the larger-minus-smaller subtraction of magnitudes it
    comes to, worked by ``column_working``; the sign in front where the result is negative."""
    written = f"{value}{sign}{term}"
    size = abs(value)
    if value >= 0 and sign == "+":
        inner, negative = (value, "+", term), False
    elif value < 0 and sign == "-":  # -x - t = -(x + t)
        inner, negative = (size, "+", term), True
    elif value >= 0:  # v - t
        inner, negative = ((value, "-", term), False) if value >= term else ((term, "-", value), True)
    else:  # -x + t
        inner, negative = ((term, "-", size), False) if term >= size else ((size, "-", term), True)
    reduced = f"{inner[0]}{inner[1]}{inner[2]}"
    result = str(-(size + term) if sign == "-" and value < 0 else value + term if sign == "+" else value - term)
    if negative:
        reduced = f"-({reduced})"
    shown = written if reduced == written else f"{written} = {reduced}"
    if max(inner[0], inner[2]) < 10:  # one digit each: the step is one the model knows by heart
        return f"{shown} = {result}"
    return f"{shown}: {' '.join(column_working(*inner)[:-1])} ={result}"


def column_working(a: int, op: str, b: int) -> list[str]:
    """``a op b`` (non-negative, ``a >= b`` for ``-``) digit by digit, least significant first, then the result
    as it is read.

    Every step has one shape (``digit op digit op carry = value``), so the carry a step needs sits at the same
    place in the step before: an unseen pair of operands is a sequence of practised single-digit steps. Sums are
    written with two digits (``08``: carry 0, digit 8); a borrowing difference shows the borrowed ten on its first
    digit (``12-8-0=4``, then ``5-3-1=1``).

    >>> column_working(47, "+", 38)
    ['7+8+0=15', '4+3+1=08', '=85']
    >>> column_working(52, "-", 38)
    ['12-8-0=4', '5-3-1=1', '=14']
    """
    width = max(len(str(a)), len(str(b)))
    steps, carry = [], 0
    for x, y in zip(map(int, str(a).zfill(width)[::-1]), map(int, str(b).zfill(width)[::-1]), strict=True):
        if op == "+":
            steps.append(f"{x}+{y}+{carry}={x + y + carry:02d}")
            carry = (x + y + carry) // 10
        else:
            borrow = int(x - y - carry < 0)
            steps.append(f"{x + 10 * borrow}-{y}-{carry}={x + 10 * borrow - y - carry}")
            carry = borrow
    return [*steps, f"={a + b if op == '+' else a - b}"]


def _chain_text(first: int, rest: list[tuple[str, int]]) -> str:
    return " ".join([str(first), *(f"{sign} {term}" for sign, term in rest)])


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


def _gsm_symbolic(entry: dict[str, Any], style: str = "lines") -> Working | None:
    cot = str(entry.get("metadata", {}).get("answer_cot") or "")
    return gsm8k_working(cot) if "####" in cot else None


def _expression_entry(entry: dict[str, Any], style: str = "lines") -> Working | None:
    expression = entry.get("metadata", {}).get("expression")
    return expression_working(str(expression), style) if expression else None


# reasoning-gym task -> its worked solution from an entry, in a style (None: this entry has none)
WORKINGS: dict[str, Callable[[dict[str, Any], str], Working | None]] = {
    "gsm_symbolic": _gsm_symbolic,
    "chain_sum": _expression_entry,
    "basic_arithmetic": _expression_entry,
}
