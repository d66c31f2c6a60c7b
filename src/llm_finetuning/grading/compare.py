"""Equality of two normalised answers: structure first, then each element by value.

An answer is read as one of (``parse``):

* a list of solutions (``1, 2``, ``x=1 \\text{ or } x=-1``, ``\\{1, 2\\}``, ``1 \\pm \\sqrt2``, a union
  ``A \\cup B``) — compared as a multiset: order free, nothing missing, nothing extra (a ``\\pm``
  element is two values; a restriction ``x \\neq 3`` after an answer is no element); elements that
  name different variables keep their labels (``a = 8, b = 4``) and match label by label, or a tuple
  in order;
* a bracketed sequence (tuple, vector, interval, matrix row; ``,`` or ``;`` between items) — same
  brackets, same length, equal element by element, in order; a relation in one variable is an
  interval or a union of them (``relations``; relations joined by ``∧`` by their intersection); a
  ratio ``3:7`` is a sequence too, and a two-term ratio also equals the fraction it makes;
* an equation or chain ``a = b = c`` — two equations match side by side or up to a constant factor.
  A chain whose leading sides only name the quantity stands for its last side when compared with a
  non-equation (``labels``: ``PQ = 6``, ``\\frac{AE}{EB} = \\frac12``, ``y = 3^2 = 9``; but ``5 = 2p +
  q`` stays an equation); an AMC choice ``(C) 24`` answers ``C`` by its letter and ``24`` by its value;
* matrix arithmetic (``A + B``, ``3A``, ``A^{-1}``) — evaluated by sympy in the worker (``matrices``)
  and compared with a matrix, a vector or a tuple;
* solutions as labelled lists between semicolons (``a=5,b=2;a=7,b=2``) — a list of solutions;
* a scalar — equal as text, else by exact value (``expr``: Fractions, microseconds; a decimal of
  twelve or more significant digits also equals the rational it renders to double precision), else by
  a floating-point verdict (``numeric``), else by sympy in a killable worker (``symbolic``) under the
  caller's time limit, behind guards against huge powers and factorials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import expr, labels, matrices, numeric, relations, symbolic
from .normalize import strip_variable

MAX_ELEMENTS = 64  # longer lists are compared as text only
_MATRIX = re.compile(  # one literal: its body holds no other \begin or \end
    r"^[(\[]?\\begin\{([pbvBV]?matrix|array)\}(?:\{[^{}]*\})?((?:(?!\\(?:begin|end)\{).)*)\\end\{\1\}[)\]]?$"
)
_CHOICE = re.compile(r"^\(([A-Ea-e])\)(.*)$|^([A-E])$")  # (C), C, or AMC's "(C) 24"
_WORD = re.compile(r"[A-Za-z ]*[A-Za-z]{4}[A-Za-z ]*")
_SEPARATORS = (",", ";", "\\cup")
_LABEL_EQUALS = re.compile(  # "a=", "x_1=", "\\theta=", "width=" (a word label, normalize)
    r"^([A-Za-z](?:_\{?\w+\}?)?|[A-Za-z]{3,}|\\[A-Za-z]+)=(?!=)"
)
_LETTER_LABEL = re.compile(r"[A-Za-z](?:_\{?\d\}?)?")  # x, b, x_1: labels ordered alphabetically in a tuple
_INFINITY = re.compile(r"^[+-]?\\infty$")


@dataclass(frozen=True)
class Seq:
    """An ordered, bracketed answer: tuple, vector, interval, ratio or matrix (rows are nested ``Seq``)."""

    opening: str
    closing: str
    items: tuple


@dataclass(frozen=True)
class Bag:
    """An unordered answer: solution list, set or union; ``kind`` is ``"set"`` for a ``\\{...\\}``."""

    items: tuple
    kind: str = "list"


@dataclass(frozen=True)
class MatrixArithmetic:
    """Matrices with arithmetic around them (``A + B``, ``3A``, ``A^{-1}``) as a sympy expression."""

    python: str


@dataclass(frozen=True)
class Equation:
    """``sides[0] = sides[1] (= …)``."""

    sides: tuple[str, ...]


def parse(text: str):
    """The structure of a normalised answer: ``Bag``, ``Seq``, ``Equation`` or a scalar string."""
    matrix = _MATRIX.match(text)
    if matrix:
        return _matrix(matrix.group(2))
    pm = [m.start() for m in re.finditer(r"\\(?:pm|mp)(?![a-z])", text)]
    if len(pm) == 1:
        plus, minus = text[: pm[0]] + "+" + text[pm[0] + 3 :], text[: pm[0]] + "-" + text[pm[0] + 3 :]
        return Bag((parse(plus), parse(minus)), "pm")
    if "∧" in text:  # relations that must all hold ("x \\leq 2 and x \\neq -1"): their intersection
        return _intervals(relations.intersection(split_top(text, ("∧",))), text)
    solutions = _labelled_solutions(text) if "=" in text and ("," in text or ";" in text) else None
    if solutions:
        return Bag(solutions)
    parts = split_top(text, _SEPARATORS)
    if len(parts) > 1:
        items = _elements(_list_parts(parts[:MAX_ELEMENTS]))
        if len(items) == 1:
            return items[0]
        return _union(items) if len(split_top(text, ("\\cup",))) == len(parts) else Bag(items)
    if text.startswith("\\{") and text.endswith("\\}") and _encloses(text, 2):
        return Bag(_elements(split_top(text[2:-2], (",", ";"))[:MAX_ELEMENTS]), "set")
    if text[:1] in "([" and text[-1:] in ")]" and _encloses(text, 1):
        items = split_top(text[1:-1], (",",))
        items = items if len(items) > 1 else split_top(text[1:-1], (";",))
        if len(items) > 1:
            return Seq(text[0], text[-1], tuple(parse(p) for p in items[:MAX_ELEMENTS]))
    sides = split_top(text, ("=",))
    if len(sides) >= 2 and all(sides) and "\\" not in sides[0][-1:]:
        return Equation(tuple(sides[:MAX_ELEMENTS]))
    arithmetic = matrices.to_python(text)
    if arithmetic is not None:
        return MatrixArithmetic(arithmetic)
    if relations.RELATION.search(text):
        return _intervals(relations.intervals(text), text)
    ratio = split_top(text, (":",))
    if len(ratio) > 1 and all(ratio):
        return Seq(":", ":", tuple(parse(p) for p in ratio[:MAX_ELEMENTS]))
    return text


def _intervals(found: list | None, text: str):
    """Intervals from ``relations`` as a ``Seq``, or a union ``Bag``; ``text`` itself when none."""
    if not found:
        return text
    found = relations.merged(found) or found
    pieces = tuple(Seq(opening, closing, (low, high)) for opening, low, high, closing in found)
    return pieces[0] if len(pieces) == 1 else Bag(pieces, "union")


def _union(items: tuple):
    """Answers joined by ``\\cup``: intervals with numeric ends are merged where they overlap or touch
    (``(-2, 3) \\cup [3, 5]`` is ``(-2, 5]``); anything else is a union of its items."""
    intervals = [
        (item.opening, *item.items, item.closing) for item in items
        if isinstance(item, Seq) and item.opening in "([" and item.closing in ")]" and len(item.items) == 2
        and all(isinstance(end, str) for end in item.items)
    ]  # fmt: skip
    if len(intervals) == len(items):
        return _intervals(intervals, "")
    return Bag(items, "union")


def _labelled_solutions(text: str) -> tuple | None:
    """Solutions written as labelled lists, each naming the same variables: between semicolons
    (``a=5,b=2;a=7,b=2``) or one after another (``a=5,b=2,a=7,b=2``, from "… and …"); a list of
    solutions, each compared label by label or as a tuple ``(5, 2)``. ``None`` for anything else."""
    parts = [split_top(group, (",",)) for group in split_top(text, (";",))]
    if len(parts) == 1:  # no semicolon: groups of the labels, repeated in turn
        names = {m.group(1) for p in parts[0] if (m := _LABEL_EQUALS.match(p))}
        size = len(names)
        parts = [parts[0][i : i + size] for i in range(0, len(parts[0]), size)] if size > 1 else parts
    names = [sorted(m.group(1) for p in group if (m := _LABEL_EQUALS.match(p))) for group in parts]
    if len(parts) < 2 or len(set(names[0])) < 2:
        return None
    if any(name != names[0] or len(group) != len(name) for name, group in zip(names, parts)):
        return None
    return tuple(parse(",".join(group)) for group in parts[:MAX_ELEMENTS])


def _list_parts(parts: list[str]) -> list[str]:
    """A list's parts with their leading ``x =`` removed when they all name one variable (solutions:
    ``x = 2, x = -3``) and kept when they name several (``a = 8, b = 4`` is compared label by
    label); a restriction such as ``x \\neq 3`` after an answer that is no relation is dropped
    (``x + 3, x \\neq 3``)."""
    names = {m.group(1) for p in parts if (m := _LABEL_EQUALS.match(p))}
    if len(names) < 2:
        parts = [strip_variable(p) for p in parts]
    restrictions = [p for p in parts if "\\neq" in p and relations.intervals(p)]
    if restrictions and any(not relations.RELATION.search(p) for p in parts):
        parts = [p for p in parts if p not in restrictions]
    return parts


def _elements(parts) -> tuple:
    """A list's elements, with each ``a \\pm b`` counted as its two values (``\\pm 2, \\pm 3``)."""
    items = []
    for part in parts:
        item = parse(part)
        items.extend(item.items if isinstance(item, Bag) and item.kind == "pm" else (item,))
    return tuple(items)


def _matrix(body: str) -> Seq:
    rows = [r for r in body.split("\\\\") if r]
    cells = tuple(Seq("(", ")", tuple(parse(c) for c in r.split("&"))) for r in rows)
    if len(cells) == 1 or all(len(r.items) == 1 for r in cells):  # a vector
        return Seq("(", ")", tuple(item for row in cells for item in row.items))
    return Seq("(", ")", cells)


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
    for char in text[width:-width]:
        depth += char in "([{"
        depth -= char in ")]}"
        if depth < 0:
            return False
    return depth == 0


def equal(pred, gold, timeout: float) -> bool:
    """Structural equality of two ``parse`` results (see the module docstring)."""
    if isinstance(pred, Equation) or isinstance(gold, Equation):
        return _equal_equations(pred, gold, timeout)
    if isinstance(pred, MatrixArithmetic) or isinstance(gold, MatrixArithmetic):
        sides = _as_matrix(pred), _as_matrix(gold)
        return None not in sides and matrices.equal(*sides, timeout)
    if isinstance(gold, Bag) and isinstance(pred, Bag):
        return _same_multiset(pred.items, gold.items, timeout)
    if isinstance(gold, Bag) and gold.kind == "set" and len(gold.items) == 1:
        return equal(pred, gold.items[0], timeout)
    if isinstance(pred, Bag) and pred.kind == "set" and len(pred.items) == 1:
        return equal(pred.items[0], gold, timeout)
    if isinstance(gold, Seq) and isinstance(pred, Bag) and pred.kind == "list":  # "1, 2" for "(1, 2)"
        pred = _as_tuple(pred, gold)
    if isinstance(pred, Seq) and isinstance(gold, Bag) and _all_labelled(gold):  # (8, 4) for a=8, b=4
        gold = _as_tuple(gold, pred)
    if isinstance(gold, Seq) and isinstance(pred, Seq):
        if _is_ratio(pred) and _is_ratio(gold) and len(pred.items) == len(gold.items) == 2:
            return scalar_equal(_fraction(pred), _fraction(gold), timeout)
        return (
            (pred.opening, pred.closing) == (gold.opening, gold.closing)
            and len(pred.items) == len(gold.items)
            and all(equal(p, g, timeout) for p, g in zip(pred.items, gold.items))
        )
    if isinstance(gold, str) and isinstance(pred, str):
        return scalar_equal(pred, gold, timeout)
    ratio = pred if _is_ratio(pred) else gold if _is_ratio(gold) else None
    if ratio is not None and len(ratio.items) == 2:  # 3:7 and \frac{3}{7}
        other = gold if ratio is pred else pred
        return isinstance(other, str) and scalar_equal(_fraction(ratio), other, timeout)
    return False


def _as_matrix(value) -> str | None:
    """A matrix, a vector, a tuple (``parse``'s ``Seq``) or a scalar as a sympy ``Matrix``; ``None``
    otherwise."""
    if isinstance(value, MatrixArithmetic):
        return value.python
    if isinstance(value, str):  # a scalar is the 1 x 1 matrix u^T v gives
        found = matrices.entries([value])
        return matrices.matrix([found]) if found else None
    if not isinstance(value, Seq) or (value.opening, value.closing) != ("(", ")"):
        return None
    rows = [row.items if isinstance(row, Seq) else (row,) for row in value.items]
    found = [matrices.entries(list(row)) if all(isinstance(i, str) for i in row) else None for row in rows]
    if None in found or len({len(row) for row in found}) != 1:
        return None
    return matrices.matrix(found)


def _same_choice(pred_match, pred: str, gold_match, gold: str, timeout: float) -> bool:
    """Choices by letter; an AMC-style ``(C) 24`` against a gold that is not a letter by its value."""
    if pred_match and gold_match:
        letters = [(m.group(1) or m.group(3)).upper() for m in (pred_match, gold_match)]
        return letters[0] == letters[1]
    match, other = (pred_match, gold) if pred_match else (gold_match, pred)
    value = match.group(2)  # None for a bare letter
    return bool(value) and scalar_equal(value, other, timeout)


def _as_tuple(bag: Bag, like: Seq) -> Seq:
    """A list read as a tuple bracketed like ``like``. Values labelled by single-letter variables go in
    alphabetical order, the order tuples of them are written in (``y = 2, x = 3`` is the pair ``(x, y) =
    (3, 2)``); any other list stays as written (``r = 3, \\theta = \\pi`` is ``(3, \\pi)``)."""
    items = bag.items
    if _all_labelled(bag) and all(_LETTER_LABEL.fullmatch(item.sides[0]) for item in items):
        items = tuple(sorted(items, key=lambda item: item.sides[0]))
    return Seq(like.opening, like.closing, items)


def _all_labelled(bag: Bag) -> bool:
    """A list of equations each naming its own variable (``a=8, b=4``)."""
    names = [item.sides[0] for item in bag.items if isinstance(item, Equation) and len(item.sides) == 2]
    return bag.kind == "list" and len(names) == len(bag.items) == len(set(names)) > 1


def _is_ratio(value) -> bool:
    return isinstance(value, Seq) and value.opening == ":" and all(isinstance(i, str) for i in value.items)


def _fraction(ratio: Seq) -> str:
    return f"\\frac{{{ratio.items[0]}}}{{{ratio.items[1]}}}"


def _equal_equations(pred, gold, timeout: float) -> bool:
    """Equations side by side; a labelled chain against anything else by its last side (``labels``)."""
    if isinstance(pred, Equation) and isinstance(gold, Equation):
        if len(pred.sides) == len(gold.sides) == 2 and _same_equation(pred.sides, gold.sides, timeout):
            return True
        if labels.label_text(pred.sides) != labels.label_text(gold.sides):
            return False
        values = labels.labelled_value(pred.sides, broad=True), labels.labelled_value(gold.sides, broad=False)
        return None not in values and equal(parse(values[0]), parse(values[1]), timeout)
    if isinstance(pred, Equation):
        value = labels.labelled_value(pred.sides, broad=True)
        return value is not None and equal(parse(value), gold, timeout)
    value = labels.labelled_value(gold.sides, broad=False)
    return value is not None and equal(pred, parse(value), timeout)


def _same_multiset(pred: tuple, gold: tuple, timeout: float) -> bool:
    """The same answers, order free; an answer written twice the same way counts once (a solution set
    listed with a repeat, ``(3, 17), (17, 3), (3, 17)``)."""
    pred, gold = tuple(dict.fromkeys(pred)), tuple(dict.fromkeys(gold))
    if len(pred) != len(gold):
        return False
    unmatched = list(gold)
    for item in pred:
        match = next((i for i, g in enumerate(unmatched) if equal(item, g, timeout)), None)
        if match is None:
            return False
        unmatched.pop(match)
    return True


def _same_equation(pred: tuple[str, ...], gold: tuple[str, ...], timeout: float) -> bool:
    if scalar_equal(pred[0], gold[0], timeout) and scalar_equal(pred[1], gold[1], timeout):
        return True
    left = expr.to_python(f"{pred[0]}-({pred[1]})")
    right = expr.to_python(f"{gold[0]}-({gold[1]})")
    if left is None or right is None or expr.too_big_for_sympy(left) or expr.too_big_for_sympy(right):
        return False
    verdict = numeric.proportional(left, right)
    if verdict is not None:
        return verdict
    return symbolic.equal(left, right, timeout, relation="proportional") is True


def scalar_equal(pred: str, gold: str, timeout: float) -> bool:
    """One value against another: text, exact rational value, floating point, then sympy."""
    if pred == gold:
        return True
    choice_pred, choice_gold = _CHOICE.match(pred), _CHOICE.match(gold)
    if choice_gold or choice_pred:  # multiple choice: "(C)" = "C", case-insensitive
        return _same_choice(choice_pred, pred, choice_gold, gold, timeout)
    if pred.lower() == gold.lower() and pred.replace(" ", "").isalpha():
        return True
    if _WORD.fullmatch(pred) or _WORD.fullmatch(gold):  # text answers ("Monday") match as text only
        return False
    if _INFINITY.match(pred) or _INFINITY.match(gold):
        return pred.lstrip("+") == gold.lstrip("+")
    left, right = expr.to_python(pred), expr.to_python(gold)
    if left is None or right is None:
        return False
    if left == right:
        return True
    left_value, right_value = expr.exact_value(left), expr.exact_value(right)
    if numeric.rounded_gold(gold, pred, left, left_value):  # a gold 0.67 for an answer \frac23
        return True
    if left_value is not None and right_value is not None:
        return (
            left_value == right_value
            or numeric.written_to_double(pred, left_value, gold, right_value)
            or numeric.written_to_double(gold, right_value, pred, left_value)
        )
    if expr.too_big_for_sympy(left) or expr.too_big_for_sympy(right):
        return False
    verdict = numeric.verdict(left, right)
    if verdict is not None:
        return verdict
    return symbolic.equal(left, right, timeout) is True
