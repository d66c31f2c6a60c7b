"""The grader's cheap normalisation layer: string rewrites that make equal answers look alike.

``normalize`` applies, in order (each is a rule of the grader, listed in ``math_grading``):

1. Unicode math (``−``, ``×``, ``÷``, ``π``, ``√``, ``∞``, ``≤``, ``≥``, ``∪``, ``°``) becomes LaTeX.
2. Math delimiters go: ``$``, ``\\(``, ``\\)``, ``\\[``, ``\\]``, ``\\displaystyle``; ``\\left`` and
   ``\\right`` are dropped (``\\left.`` entirely); an outer ``\\boxed{}``/``\\fbox{}`` is unwrapped.
3. ``\\dfrac``/``\\tfrac`` become ``\\frac``; ``\\le``/``\\ge``/``\\neq`` get their long names.
4. Text wrappers (``\\text``, ``\\textbf``, ``\\mathrm``, ``\\mathbf``, ``\\mbox``, ``\\operatorname``)
   are replaced by their contents.
5. Degrees (``^\\circ``, ``^{\\circ}``, ``\\degree``), percent (``\\%``, ``%``) and dollars (``\\$``)
   are removed: stripped, not interpreted, so ``25\\%`` equals ``25`` and not ``0.25``.
6. Thousands separators go: ``1{,}000``, ``1\\,000`` and a bare ``1,234,567`` (groups of exactly
   three digits, the whole answer being that number).
7. LaTeX spacing (``\\,``, ``\\;``, ``\\!``, ``\\quad``, ``~``) becomes a space.
8. Trailing unit words after a number or expression go (``5 cm``, ``12 square units``,
   ``3 \\text{ dollars}``); a lone word answer (``Monday``) is kept.
9. A word ``or`` / ``and`` between spaces becomes a comma (a list; ``42 or 43`` is then a hedge that
   matches no single answer). A leading ``x =``, ``y=``, ``\\theta =``, ``f(x) =`` or ``x \\in`` is removed (one variable on the
   left); other equations are kept whole and compared as equations.
10. Trailing punctuation (``.``, ``,``, ``;``, ``:``) and surrounding space are removed.
11. A mixed number written with a space (``2 1/2``) becomes ``2\\frac{1}{2}``; then spaces are
    removed, except between words of a text answer.
"""

from __future__ import annotations

import re

MAX_NORMALIZE_CHARS = 20_000  # beyond this only trivial clean-up is done (hostile or prose)

_UNICODE = {
    "−": "-", "–": "-", "×": "\\times ", "÷": "\\div ", "·": "\\cdot ", "π": "\\pi ", "√": "\\sqrt ",
    "∞": "\\infty ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\neq ", "∪": "\\cup ", "°": "^\\circ",
}  # fmt: skip
_COMMANDS = [
    ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\displaystyle", ""), ("\\left.", ""),
    ("\\right.", ""), ("\\left", ""), ("\\right", ""), ("\\bigl", ""), ("\\bigr", ""), ("\\Bigl", ""),
    ("\\Bigr", ""), ("\\big", ""), ("\\Big", ""), ("\\(", ""), ("\\)", ""), ("\\[", ""), ("\\]", ""),
    ("^{\\circ}", ""), ("^\\circ", ""), ("{}^\\circ", ""), ("\\circ", ""), ("\\degree", ""), ("\\%", ""),
    ("%", ""), ("\\$", ""), ("$", ""), ("\\leqslant", "\\leq"), ("\\geqslant", "\\geq"), ("\\ne ", "\\neq "),
    ("{,}", ""), ("\\!", ""), ("\\,", " "), ("\\;", " "), ("\\:", " "), ("\\qquad", " "),
    ("\\quad", " "), ("~", " "), ("\\lbrace", "\\{"), ("\\rbrace", "\\}"), ("\\lvert", "|"), ("\\rvert", "|"),
    ("\\vert", "|"), ("\\mid", "|"), ("\\colon", ":"), ("\\cdotp", "\\cdot"),
]  # fmt: skip
_RELATIONS = [(re.compile(r"\\le(?![a-z])"), "\\leq"), (re.compile(r"\\ge(?![a-z])"), "\\geq")]
_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname|boxed|fbox)\s*\{([^{}]*)\}"
)
_THOUSANDS_SPACED = re.compile(r"(?<=\d)\\,(?=\d{3}(?!\d))")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_UNIT = re.compile(
    r"(?<=\s)(?:(?:square|sq\.?|cubic)\s+)?[A-Za-z]{2,}\.?(?:\^\{?[23]\}?)?"
    r"(?:\s+(?:per|/)\s+[A-Za-z]+)?(?:\s+(?:and|of)\s+[A-Za-z]+)?\s*$"
)
_KEEP_WORDS = {
    "pi",
    "infty",
    "sqrt",
    "frac",
    "sin",
    "cos",
    "tan",
    "log",
    "ln",
    "cot",
    "sec",
    "csc",
    "or",
    "and",
}
_LEADING_VARIABLE = re.compile(
    r"^\s*(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+|[A-Za-z]\([A-Za-z]\))\s*(?:=|\\in(?![a-z]))(?!=)"
)
_MIXED = re.compile(r"^(-?\d+)\s+(\d+)\s*/\s*(\d+)$")
_SPACE_BETWEEN_WORDS = re.compile(r"(?<=[A-Za-z])\s+(?=[A-Za-z])")
_SPACE = re.compile(r"\s+")
_OR_AND = re.compile(r"\s+(?:or|and)\s+")
_BACKSLASH_SPACE = re.compile(r"(?<!\\)\\ ")  # "\ " is a space; "\\ " is a matrix row end and a space


def normalize(text: str) -> str:
    """``text`` after the rules in the module docstring (linear time; never raises on a string)."""
    text = text.strip()
    if len(text) > MAX_NORMALIZE_CHARS:
        return text
    for char, latex in _UNICODE.items():
        if char in text:
            text = text.replace(char, latex)
    text = _THOUSANDS_SPACED.sub("", text)
    for old, new in _COMMANDS:
        if old in text:
            text = text.replace(old, new)
    text = _BACKSLASH_SPACE.sub(" ", text)
    for pattern, new in _RELATIONS:
        text = pattern.sub(lambda _, new=new: new, text)
    text = _strip_outer_braces(_unwrap(text).strip())
    text = _strip_units(text)
    text = _OR_AND.sub(",", text)
    text = strip_variable(text)
    text = text.rstrip(" .,;:").strip()
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    mixed = _MIXED.match(text)
    if mixed:
        text = f"{mixed.group(1)}\\frac{{{mixed.group(2)}}}{{{mixed.group(3)}}}"
    if _SPACE_BETWEEN_WORDS.search(text) and not re.search(r"[\d\\^_{}=]", text):
        return _SPACE.sub(" ", text).lower()  # a text answer: keep word boundaries, ignore case
    return _SPACE.sub("", text)


def _unwrap(text: str) -> str:
    """Replace text wrappers by their contents, innermost first (bounded passes)."""
    for _ in range(5):
        if "\\" not in text:
            break
        unwrapped = _WRAPPER.sub(lambda m: " " + m.group(1) + " ", text)
        if unwrapped == text:
            break
        text = unwrapped
    return text


def strip_variable(text: str) -> str:
    """``text`` without a leading ``x =`` / ``x \\in`` (rule 9), for each element of a list too."""
    return _LEADING_VARIABLE.sub("", text, count=1).strip()


def _strip_outer_braces(text: str) -> str:
    """``{{1}}`` → ``1``: all redundant outer braces in one linear pass."""
    count = min(len(text) - len(text.lstrip("{")), len(text) - len(text.rstrip("}")))
    if count == 0:
        return text
    inner, depth = text[count:-count], 0
    for char in inner:
        depth += (char == "{") - (char == "}")
        if depth < 0:
            return text
    return inner.strip() if depth == 0 else text


def _strip_units(text: str) -> str:
    """Drop trailing unit words after a number or expression; keep a whole-word answer."""
    for _ in range(3):
        tail_start = max(0, len(text) - 80)  # units are short; searching only the tail keeps this linear
        match = _UNIT.search(text, tail_start)
        if not match or not re.search(r"\d", text[: match.start()]):
            return text
        words = set(re.findall(r"[A-Za-z]+", match.group()))
        if words & _KEEP_WORDS:
            return text
        text = text[: match.start()].rstrip()
    return text
