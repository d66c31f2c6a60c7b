"""Relations as intervals, so ``x > 3``, ``3 < x``, ``-x < -3`` and ``(3, \\infty)`` are one answer.

``intervals(text)`` reads a normalised relation in one variable as a union of intervals
``(opening, low, high, closing)``:

* ``x > 3`` → ``(3, \\infty)``; ``3 \\geq y`` → ``(-\\infty, 3]``; ``x \\neq 3`` → ``(-\\infty, 3) \\cup (3, \\infty)``;
* ``-1 \\leq x < 2`` and ``2 > x \\geq -1`` → ``[-1, 2)``; a chain holds both its bounds, whatever
  its middle: ``1 \\leq |w| \\leq 3`` → ``[-3, -1] \\cup [1, 3]``, ``-1 < 2x + 1 < 5`` → ``(-1, 2)``;
* a linear relation is solved exactly: ``-y > -2`` → ``(-\\infty, 2)``, ``2x + 1 \\leq 7`` → ``(-\\infty, 3]``;
* a function value is a subject like a variable (``0 < g(t) < 2`` → ``(0, 2)``), but a relation on
  ``f(x)`` is never the same statement as one on ``x`` (``about_argument``).

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
_VARIABLE = re.compile(  # x, x_1, \theta, or a function value f(x), P(t)
    r"^(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+|[A-Za-z]\((?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)\))$"
)
_ARGUMENT = re.compile(r"^[A-Za-z]\((.+)\)$")  # the argument of a function value
_PYTHON_VARIABLE = re.compile(r"\bv_\w+")
_INFINITY = "\\infty"
_ABSOLUTE = re.compile(r"^\|([^|]+)\|$")
_NAME = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?")
_COMMAND = re.compile(r"\\[A-Za-z]+")


def intervals(text: str) -> list[Interval] | None:
    """The union of intervals ``text`` describes (see the module docstring), or ``None``."""
    pieces = RELATION.split(text)
    operators = [_OPERATOR[m] for m in RELATION.findall(text)]
    if len(pieces) == 2 and all(pieces):
        return _one_relation(pieces[0], operators[0], pieces[1])
    if len(pieces) == 3 and all(pieces) and "!=" not in operators:
        low, first, middle, second, high = pieces[0], operators[0], pieces[1], operators[1], pieces[2]
        if first[0] == second[0] == ">":  # 2 > x >= -1 is -1 <= x < 2
            low, high, first, second = high, low, _MIRROR[second], _MIRROR[first]
        if first[0] == second[0] == "<" and _VARIABLE.match(middle):
            return [("(" if first == "<" else "[", low, high, ")" if second == "<" else "]")]
        if first[0] == second[0] == "<":  # both bounds hold: 1 <= |w| <= 3, -1 < 2x + 1 < 5
            return _all_of([_one_relation(middle, _MIRROR[first], low), _one_relation(middle, second, high)])
    return None


def subject(text: str) -> str | None:
    """The variable or function value a relation is about (``x`` in ``-1 < x \\leq 2``, ``f(x)`` in
    ``f(x) \\geq 2``), or ``None`` when it is not one relation (or chain) about a single subject.

    >>> subject("0<h(t)<3"), subject("x\\\\geq2"), subject("x+y>1")
    ('h(t)', 'x', None)
    """
    pieces = RELATION.split(text)
    candidates = pieces[1:2] if len(pieces) == 3 else pieces if len(pieces) == 2 else []
    found = [p for p in candidates if _VARIABLE.match(p)]
    return found[0] if len(found) == 1 else None


def about_argument(pred: str, gold: str) -> bool:
    """Whether one relation is about a function value ``f(x)`` and the other about its argument ``x``:
    ``f(x) > 2`` states where f's values lie, ``x > 2`` where x lies; equal bounds do not make them
    the same statement."""
    if "(" not in pred and "(" not in gold:  # no function value on either side
        return False
    subjects = subject(pred), subject(gold)
    if None in subjects:
        return False
    arguments = [_ARGUMENT.match(s) for s in subjects]
    return any(a is not None and a.group(1) == other for a, other in zip(arguments, reversed(subjects)))


def intersection(parts: list[str]) -> list[Interval] | None:
    """Where every relation in ``parts`` holds (``x \\leq 2`` and ``x \\neq -1``), as intervals; ``None``
    unless they are all about one variable with endpoints that evaluate, or when nothing is left.

    >>> intersection(["x\\\\leq2", "x\\\\neq-1"])
    [('(', '-\\\\infty', '-1', ')'), ('(', '-1', '2', ']')]
    """
    names = {frozenset(_NAME.findall(_COMMAND.sub(" ", part))) for part in parts}
    if len(names) != 1 or len(next(iter(names))) != 1:
        return None
    return _all_of([intervals(part) for part in parts])


def merged(pieces: list[Interval]) -> list[Interval] | None:
    """The same union with overlapping or touching intervals joined, in order (``(-2, 3) \\cup [3, 5]``
    is ``(-2, 5]``); ``None`` when an endpoint has no exact value.

    >>> merged([("[", "3", "5", "]"), ("(", "-2", "3", ")")])
    [('(', '-2', '5', ']')]
    """
    try:
        ordered = sorted(pieces, key=lambda i: (_value(i[1]), i[0] == "("))
        result = [ordered[0]]
        for piece in ordered[1:]:
            last = result[-1]
            low, high = _value(piece[1]), _value(last[2])
            if low < high or (low == high and (last[3] == "]" or piece[0] == "[")):  # overlap or touch
                top = max((last, piece), key=lambda i: (_value(i[2]), i[3] == "]"))
                result[-1] = (last[0], last[1], top[2], top[3])
            else:
                result.append(piece)
    except ValueError:
        return None
    return result


def _all_of(unions: list[list[Interval] | None]) -> list[Interval] | None:
    result: list[Interval] = [("(", "-" + _INFINITY, _INFINITY, ")")]
    try:
        for found in unions:
            if found is None:
                return None
            result = [piece for a in result for b in found if (piece := _meet(a, b)) is not None]
    except ValueError:  # an endpoint without an exact value
        return None
    return result or None


def _meet(a: Interval, b: Interval) -> Interval | None:
    """The intersection of two intervals (``None`` when empty); raises ``ValueError`` when an
    endpoint has no value."""
    low = max((a, b), key=lambda i: (_value(i[1]), i[0] == "("))
    high = min((a, b), key=lambda i: (_value(i[2]), i[3] == "]"))
    if _value(low[1]) > _value(high[2]) or (
        _value(low[1]) == _value(high[2]) and (low[0], high[3]) != ("[", "]")
    ):
        return None
    return (low[0], low[1], high[2], high[3])


def _value(endpoint: str) -> float:
    if endpoint.lstrip("+-") == _INFINITY:
        return float("-inf") if endpoint.startswith("-") else float("inf")
    value = expr.exact_value(expr.to_python(endpoint) or "")
    if value is None:
        raise ValueError(endpoint)
    return float(value)


def _one_relation(left: str, op: str, right: str) -> list[Interval] | None:
    if _is_subject(right) and not _is_subject(left):  # 3 < x  ==  x > 3;  3 >= |z|  ==  |z| <= 3
        left, right, op = right, left, _MIRROR[op]
    absolute = _ABSOLUTE.match(left)
    if absolute and op != "!=":  # |x - 1| < 3  ==  -3 < x - 1 < 3
        return _absolute(absolute.group(1), op, right)
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


def _is_subject(side: str) -> bool:
    return _VARIABLE.match(side) is not None or _ABSOLUTE.match(side) is not None


def _absolute(inside: str, op: str, bound: str) -> list[Interval] | None:
    """``|inside| op bound``: both sides of zero, as one interval (``<``) or two (``>``)."""
    below = _one_relation(inside, _MIRROR[op], f"-({bound})")
    above = _one_relation(inside, op, bound)
    if below is None or above is None:
        return None
    if op.startswith("<"):
        return _all_of([below, above])
    return [*below, *above]


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
