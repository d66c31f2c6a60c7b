"""Labels: which sides of an equation only name the quantity, so that its last side is the value.

A chain ``a = b = c`` compared with something that is not an equation stands for its last side when
every other side is a label (``PQ = 6``, ``(a, b) = (5, 1)``, ``S_1 : S_2 = 3 : 7``, ``f(2) = 11``) or
a constant that the chain computes (``y = 3^2 = 9``). A stripping rule may only drop a side that states
no value of its own, so two rules keep it from making different statements equal:

* a **constant** side is dropped only when the last side is a constant with the same value: ``5 = 2p +
  q`` is an equation, not the value ``2p + q``, and ``x = 2 = 3`` contradicts itself and states nothing;
* on the **gold** side only simple labels count (a name, a segment, a tuple or ratio of names, a
  fraction of two names such as ``\\frac{AE}{EB}``, an area ``[ABC]``, ``|CD|``, a function value
  ``f(2)``), so a gold equation ``x + y = 5`` is not read as ``5``. On the **answer** side a label is
  also any expression with no number outside its exponents and subscripts (``a + b = 7``), or a LaTeX
  operator the grader does not evaluate (``\\lim … = 3``).

    >>> labelled_value(("\\\\frac{AE}{EB}", "\\\\frac{1}{2}"), broad=False)
    '\\\\frac{1}{2}'
    >>> labelled_value(("5", "2p+q"), broad=True) is None, labelled_value(("x", "2", "3"), broad=True) is None
    (True, True)
"""

from __future__ import annotations

import re

from . import expr, numeric

_NAME = (  # x, PQ, x_1, S_{ABC}, S_{\triangle ABD}, \angle ABC, [ABC]
    r"(?:\[[A-Za-z]{2,4}\]|(?:m?\\(?:angle|overline|triangle|widehat))?\{?(?:[A-Za-z]{1,4}|\\[a-zA-Z]+)"
    r"(?:_(?:\{(?:\\[a-zA-Z]+)?\w{1,4}\}|\w))?'?\}?)"
)
_SIMPLE_LABEL = re.compile(  # x_1, PQ, \sin\theta, (a,b), S_1:S_2, \frac{AE}{EB}, |CD|, f(2), g(f(3))
    rf"^(?:{_NAME}|\\[a-z]+(?:\^\{{?-?\d\}}?)?{_NAME}|\({_NAME}(?:,{_NAME})+\)|{_NAME}(?::{_NAME})+"
    rf"|\\frac\{{{_NAME}\}}\{{{_NAME}\}}|\|{_NAME}\||[A-Za-z](?:\^\{{?-1\}}?|'+)?\((?:[^()=]|\([^()=]*\)){{1,16}}\))$"
)
_LABEL_CHARS = re.compile(r"^(?:[A-Za-z(),:|+\-*/{}\[\]'\s]|\\[A-Za-z]+|_\{?\w{1,3}\}?)+$")
_SCRIPT = re.compile(r"[\^_](?:\{[^{}]*\}|\\?.)")  # a superscript or subscript: a^2, a_{10}


def labelled_value(sides: tuple[str, ...], broad: bool) -> str | None:
    """The last side of a chain whose other sides are labels, or constants of the last side's value;
    else ``None``. With ``broad`` (the answer side) a label may be any expression without numbers or
    an operator the grader does not evaluate, and a chain ending in a constant needs only its first
    side to be a label (``y = 2x = 6``: a label, the working, then the value)."""
    last = None  # the last side's value as a constant, () when it is none; read when first needed
    for index, side in enumerate(sides[:-1]):
        python = expr.to_python(side)
        constant = _constant(python)
        if last is None and (constant is not None or (broad and index > 0)):
            last = _constant_value(sides[-1])
        operator = python is None and re.search(r"\\[A-Za-z]", side) is not None  # \lim, \sum: not evaluated
        if broad and (operator or (index > 0 and last and constant is None)):
            continue  # an operator's value, or the working between a label and the value
        if constant is not None and "\\infty" not in side:
            if not last or not _same_value(_value(constant), last):
                return None
            continue
        label = _SIMPLE_LABEL.match(side) or (broad and _is_broad_label(side))
        if not label or "\\infty" in side:
            return None
    return sides[-1]


def label_text(sides: tuple[str, ...]) -> str:
    """The label of a chain, to check that two labelled answers name the same thing."""
    return "=".join(sides[:-1]).lower()


def _is_broad_label(side: str) -> bool:
    unscripted = _SCRIPT.sub("", side)
    return not re.search(r"\d", unscripted) and _LABEL_CHARS.match(unscripted) is not None


def _constant(python: str | None) -> str | None:
    """An ``expr`` expression when it is a constant (no variable), else ``None``."""
    return python if python is not None and "v_" not in python else None


def _constant_value(text: str) -> tuple:
    """``_value`` of ``text`` when it is a constant, else ``()``."""
    constant = _constant(expr.to_python(text))
    return _value(constant) if constant is not None else ()


def _value(constant: str) -> tuple:
    """A constant's exact value (``None`` when irrational) and its value in double precision (``None``
    when doubles cannot hold it)."""
    exact = expr.exact_value(constant)
    if exact is None:
        return None, numeric.constant_value(constant)
    try:
        return exact, complex(exact)
    except OverflowError:
        return exact, None


def _same_value(side: tuple, last: tuple) -> bool:
    """Whether two constants have one value: exactly, or to nine digits when either is irrational
    (``\\sqrt{8} = 2\\sqrt{2}``); a value the grader cannot compute is not taken on trust."""
    if side[0] is not None and last[0] is not None:
        return side[0] == last[0]
    if side[1] is None or last[1] is None:
        return False
    return abs(side[1] - last[1]) <= 1e-9 * max(1.0, abs(side[1]), abs(last[1]))
