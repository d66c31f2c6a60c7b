"""Equality of two normalised answers: structure first, then each element by value.

An answer is read as one of (``parse``):

* a list of solutions (``1, 2``, ``x=1 \\text{ or } x=-1``, ``\\{1, 2\\}``, ``1 \\pm \\sqrt2``, a union
  ``A \\cup B``) — compared as a multiset: order free, nothing missing, nothing extra;
* a bracketed sequence (tuple, vector, interval, matrix row; ``x > 3`` and ``-1 \\le x < 2`` become
  intervals) — same brackets, same length, equal element by element, in order;
* an equation ``lhs = rhs`` — equal sides, or the same equation up to a constant factor;
* a scalar — equal as text, else by exact value (``math_expr``: Fractions, microseconds), else by a
  float probe that rejects clearly different values, else by sympy in a killable worker
  (``math_symbolic``) under the caller's time limit, behind guards against huge powers and factorials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import expr, symbolic
from .normalize import strip_variable

MAX_ELEMENTS = 64  # longer lists are compared as text only
_MATRIX = re.compile(r"^\\begin\{([pbvBV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}$")
_INEQUALITY = re.compile(r"\\leq|\\geq|\\lt|\\gt|<|>")
_OPERATOR = {"<": "<", ">": ">", "\\lt": "<", "\\gt": ">", "\\leq": "<=", "\\geq": ">="}
_VARIABLE = re.compile(r"^(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)$")
_CHOICE = re.compile(r"^\(([A-Ea-e])\)$|^([A-E])$")
_WORD = re.compile(r"[A-Za-z ]*[A-Za-z]{4}[A-Za-z ]*")
_SEPARATORS = (",", ";", "\\cup")


@dataclass(frozen=True)
class Seq:
    """An ordered, bracketed answer: tuple, vector, interval or matrix (rows are nested ``Seq``)."""

    opening: str
    closing: str
    items: tuple


@dataclass(frozen=True)
class Bag:
    """An unordered answer: solution list, set or union; ``kind`` is ``"set"`` for a ``\\{...\\}``."""

    items: tuple
    kind: str = "list"


@dataclass(frozen=True)
class Equation:
    lhs: str
    rhs: str


def parse(text: str):
    """The structure of a normalised answer: ``Bag``, ``Seq``, ``Equation`` or a scalar string."""
    matrix = _MATRIX.match(text)
    if matrix:
        rows = [r for r in matrix.group(2).split("\\\\") if r]
        cells = tuple(Seq("(", ")", tuple(parse(c) for c in r.split("&"))) for r in rows)
        if len(cells) == 1 or all(len(r.items) == 1 for r in cells):  # a vector
            return Seq("(", ")", tuple(item for row in cells for item in row.items))
        return Seq("(", ")", cells)
    pm = [m.start() for m in re.finditer(r"\\(?:pm|mp)(?![a-z])", text)]
    if len(pm) == 1:
        return Bag(
            (parse(text[: pm[0]] + "+" + text[pm[0] + 3 :]), parse(text[: pm[0]] + "-" + text[pm[0] + 3 :]))
        )
    parts = split_top(text, _SEPARATORS)
    if len(parts) > 1:
        return Bag(tuple(parse(strip_variable(p)) for p in parts[:MAX_ELEMENTS]))
    if text.startswith("\\{") and text.endswith("\\}") and _encloses(text, 2):
        return Bag(tuple(parse(p) for p in split_top(text[2:-2], (",", ";"))[:MAX_ELEMENTS]), "set")
    if text[:1] in "([" and text[-1:] in ")]" and _encloses(text, 1):
        items = split_top(text[1:-1], (",",))
        if len(items) > 1:
            return Seq(text[0], text[-1], tuple(parse(p) for p in items[:MAX_ELEMENTS]))
    if _INEQUALITY.search(text):
        return _interval(text) or text
    sides = split_top(text, ("=",))
    if len(sides) == 2 and "\\" not in sides[0][-1:]:
        return Equation(*sides)
    return text


def split_top(text: str, separators: tuple[str, ...]) -> list[str]:
    """``text`` split at separators outside brackets (any bracket kind closes any, for intervals);
    word separators (``or``, ``and``) only count as whole words."""
    parts, depth, start, at = [], 0, 0, 0
    while at < len(text):
        char = text[at]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0:
            for sep in separators:
                if text.startswith(sep, at) and _whole_word(text, at, sep):
                    parts.append(text[start:at])
                    start = at = at + len(sep)
                    break
            else:
                at += 1
            continue
        at += 1
    parts.append(text[start:])
    return [p for p in parts if p] if len(parts) > 1 else parts


def _whole_word(text: str, at: int, sep: str) -> bool:
    if not sep[-1].isalpha():
        return True
    before = text[at - 1] if at else " "
    after = text[at + len(sep)] if at + len(sep) < len(text) else " "
    return not after.isalpha() and (sep.startswith("\\") or not before.isalpha())


def _encloses(text: str, width: int) -> bool:
    """True when the bracket opening ``text`` closes only at its very end."""
    depth = 0
    for at, char in enumerate(text[width:-width]):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _interval(text: str) -> Seq | None:
    """``x > 3`` → ``(3, \\infty)``; ``-1 \\leq x < 2`` → ``[-1, 2)``; None if not one variable."""
    pieces = _INEQUALITY.split(text)
    operators = [_OPERATOR[m] for m in _INEQUALITY.findall(text)]
    if len(pieces) == 2:
        (left, right), op = pieces, operators[0]
        if _VARIABLE.match(right) and not _VARIABLE.match(left):  # 3 < x  ==  x > 3
            left, right, op = right, left, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[op]
        if not _VARIABLE.match(left):
            return None
        if op.startswith("<"):
            return Seq("(", ")" if op == "<" else "]", ("-\\infty", right))
        return Seq("(" if op == ">" else "[", ")", (right, "\\infty"))
    if len(pieces) == 3 and _VARIABLE.match(pieces[1]) and operators[0][0] == operators[1][0] == "<":
        return Seq(
            "(" if operators[0] == "<" else "[", ")" if operators[1] == "<" else "]", (pieces[0], pieces[2])
        )
    return None


def equal(pred, gold, timeout: float) -> bool:
    """Structural equality of two ``parse`` results (see the module docstring)."""
    if isinstance(gold, Bag) and isinstance(pred, Bag):
        return _same_multiset(pred.items, gold.items, timeout)
    if isinstance(gold, Bag) and gold.kind == "set" and len(gold.items) == 1:
        return equal(pred, gold.items[0], timeout)
    if isinstance(pred, Bag) and pred.kind == "set" and len(pred.items) == 1:
        return equal(pred.items[0], gold, timeout)
    if isinstance(gold, Seq) and isinstance(pred, Bag) and pred.kind == "list":  # "1, 2" for "(1, 2)"
        pred = Seq(gold.opening, gold.closing, pred.items)
    if isinstance(gold, Seq) and isinstance(pred, Seq):
        return (
            (pred.opening, pred.closing) == (gold.opening, gold.closing)
            and len(pred.items) == len(gold.items)
            and all(equal(p, g, timeout) for p, g in zip(pred.items, gold.items))
        )
    if isinstance(gold, Equation) and isinstance(pred, Equation):
        return _same_equation(pred, gold, timeout)
    if isinstance(gold, str) and isinstance(pred, str):
        return scalar_equal(pred, gold, timeout)
    return False


def _same_multiset(pred: tuple, gold: tuple, timeout: float) -> bool:
    if len(pred) != len(gold):
        return False
    unmatched = list(gold)
    for item in pred:
        match = next((i for i, g in enumerate(unmatched) if equal(item, g, timeout)), None)
        if match is None:
            return False
        unmatched.pop(match)
    return True


def _same_equation(pred: Equation, gold: Equation, timeout: float) -> bool:
    if scalar_equal(pred.lhs, gold.lhs, timeout) and scalar_equal(pred.rhs, gold.rhs, timeout):
        return True
    left = expr.to_python(f"{pred.lhs}-({pred.rhs})")
    right = expr.to_python(f"{gold.lhs}-({gold.rhs})")
    if (
        left is None
        or right is None
        or expr.too_big_for_sympy(left)
        or expr.too_big_for_sympy(right)
    ):
        return False
    return symbolic.equal(left, right, timeout, relation="proportional") is True


def scalar_equal(pred: str, gold: str, timeout: float) -> bool:
    """One value against another: text, exact rational value, float probe, then sympy."""
    if pred == gold:
        return True
    choice_pred, choice_gold = _CHOICE.match(pred), _CHOICE.match(gold)
    if choice_gold or choice_pred:  # multiple choice: "(C)" = "C", case-insensitive
        letters = [m and (m.group(1) or m.group(2)).upper() for m in (choice_pred, choice_gold)]
        return bool(letters[0]) and letters[0] == letters[1]
    if pred.lower() == gold.lower() and pred.replace(" ", "").isalpha():
        return True
    if _WORD.fullmatch(pred) or _WORD.fullmatch(gold):  # text answers ("Monday") match as text only
        return False
    left, right = expr.to_python(pred), expr.to_python(gold)
    if left is None or right is None:
        return False
    if left == right:
        return True
    left_value, right_value = expr.exact_value(left), expr.exact_value(right)
    if left_value is not None and right_value is not None:
        return left_value == right_value
    if not expr.could_be_equal(left, right):
        return False
    if expr.too_big_for_sympy(left) or expr.too_big_for_sympy(right):
        return False
    return symbolic.equal(left, right, timeout) is True
