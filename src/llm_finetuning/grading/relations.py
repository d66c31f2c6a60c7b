"""Relations as intervals, so ``x > 3``, ``3 < x``, ``-x < -3`` and ``(3, \\infty)`` are one answer.

``intervals(text)`` reads a normalised relation in one variable as a union of intervals
``(opening, low, high, closing)``:

* ``x > 3`` → ``(3, \\infty)``; ``3 \\geq y`` → ``(-\\infty, 3]``; ``x \\neq 3`` → ``(-\\infty, 3) \\cup (3, \\infty)``;
* ``-1 \\leq x < 2`` and ``2 > x \\geq -1`` → ``[-1, 2)``;
* a linear relation is solved exactly: ``-y > -2`` → ``(-\\infty, 2)``, ``2x + 1 \\leq 7`` → ``(-\\infty, 3]``.

Anything else (two variables, ``x^2 > 4``) gives ``None`` and is compared as text.

    >>> intervals("-y>-2"), intervals("x\\\\neq3")
    ([('(', '-\\\\infty', '2', ')')], [('(', '-\\\\infty', '3', ')'), ('(', '3', '\\\\infty', ')')])
"""

from __future__ import annotations

import re
from fractions import Fraction

from . import expr

Interval = tuple[str, str, str, str]  # opening bracket, low end, high end, closing bracket

RELATION = re.compile(r"\\leq|\\geq|\\neq|\\lt|\\gt|<|>")
_OPERATOR = {"<": "<", ">": ">", "\\lt": "<", "\\gt": ">", "\\leq": "<=", "\\geq": ">=", "\\neq": "!="}
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}
_VARIABLE = re.compile(r"^(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)$")
_PYTHON_VARIABLE = re.compile(r"\bv_\w+")
_INFINITY = "\\infty"


def intervals(text: str) -> list[Interval] | None:
    """The union of intervals ``text`` describes (see the module docstring), or ``None``."""
    pieces = RELATION.split(text)
    operators = [_OPERATOR[m] for m in RELATION.findall(text)]
    if len(pieces) == 2 and all(pieces):
        return _one_relation(pieces[0], operators[0], pieces[1])
    if len(pieces) == 3 and _VARIABLE.match(pieces[1]) and "!=" not in operators:
        low, first, _, second, high = pieces[0], operators[0], pieces[1], operators[1], pieces[2]
        if first[0] == second[0] == ">":  # 2 > x >= -1 is -1 <= x < 2
            low, high, first, second = high, low, _MIRROR[second], _MIRROR[first]
        if first[0] == second[0] == "<":
            return [("(" if first == "<" else "[", low, high, ")" if second == "<" else "]")]
    return None


def _one_relation(left: str, op: str, right: str) -> list[Interval] | None:
    if _VARIABLE.match(right) and not _VARIABLE.match(left):  # 3 < x  ==  x > 3
        left, right, op = right, left, _MIRROR[op]
    if not _VARIABLE.match(left):
        solved = _solve_linear(left, op, right)
        if solved is None:
            return None
        op, right = solved
    if op == "!=":
        return [("(", "-" + _INFINITY, right, ")"), ("(", right, _INFINITY, ")")]
    if op.startswith("<"):
        return [("(", "-" + _INFINITY, right, ")" if op == "<" else "]")]
    return [("(" if op == ">" else "[", right, _INFINITY, ")")]


def _solve_linear(left: str, op: str, right: str) -> tuple[str, str] | None:
    """``left op right`` as ``variable op' bound`` when it is linear in one variable, else ``None``."""
    difference = expr.to_python(f"{left}-({right})")
    names = set(_PYTHON_VARIABLE.findall(difference or ""))
    if difference is None or len(names) != 1:
        return None
    name = re.compile(r"\b" + names.pop() + r"\b")
    values = [expr.exact_value(name.sub(f"({x})", difference)) for x in (0, 1, 2, -3)]
    if any(v is None for v in values):
        return None
    slope, offset = values[1] - values[0], values[0]
    if values[2] != offset + 2 * slope or values[3] != offset - 3 * slope:
        return None
    if slope == 0:
        return None
    return (op if slope > 0 else _MIRROR[op]), _latex(-offset / slope)


def _latex(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"
