"""The grader's cheap normalisation layer: string rewrites that make equal answers look alike.

``normalize`` applies, in order (each is a rule of the grader, listed in docs/grader.md):

1. Unicode math (``−``, ``×``, ``π``, ``√``, ``∞``, ``≤``, ``∈``, ``∅``, ``ℝ``, ``½``, ``²``…) becomes
   LaTeX; currency signs (``€``, ``£``) go.
2. Math delimiters go: ``$``, ``\\(``, ``\\)``, ``\\[``, ``\\]``, ``\\displaystyle``; ``\\left`` and
   ``\\right`` are dropped (``\\left.`` entirely); an outer ``\\boxed{}``/``\\fbox{}`` is unwrapped.
3. ``\\dfrac``/``\\tfrac``/``\\cfrac`` become ``\\frac``; relations get one spelling (``\\ge``, ``>=``,
   ``\\geqslant`` → ``\\geq``; ``\\lt`` → ``<``; ``!=``, ``\\ne`` → ``\\neq``); ``\\tan^{-1}`` becomes
   ``\\arctan`` (and the other inverse trigonometric functions); ``2^10`` is ``2^{10}``; a congruence
   gives its residue (``2^{100} \\equiv 2 \\pmod{7}`` is ``2``).
4. A trailing unit in a text wrapper after a number goes (``5\\text{ m}^3``, ``\\mathrm{m/s^2}``; a scale
   word stays: ``3\\text{ million units}`` is ``3 million``); other
   text wrappers (``\\text``, ``\\textnormal``, ``\\mathrm``, ``\\mathbf``, ``\\operatorname``…) are
   replaced by their contents.
5. Degrees (``^\\circ``), percent (``\\%``) and dollars (``\\$``) are removed: stripped, not
   interpreted, so ``25\\%`` equals ``25`` and not ``0.25``.
6. LaTeX spacing (``\\,``, ``\\;``, ``\\!``, ``\\quad``, ``~``) becomes a space; thousands separators go
   (``1{,}000``, ``1\\,000``, ``12,\\!345``, ``4,\\! 096``, and ``1,234,567`` or ``1 234 567`` when that is the
   whole answer); ``3{,}75`` is a decimal comma (no group of three follows), and a line break never joins
   digits (``1\\n234`` is two numbers). ``decimal_comma`` reads ``3,75`` as 3.75 for the judge, which tries
   it only against one number.
7. A number in words becomes digits (``five``, ``twenty-five``, ``3 million``; ``one half``, ``two thirds``).
8. Trailing unit words after a number or expression go (``5 cm``, ``12 square units``, ``3 dollars``; a
   measurement unit written against its number, ``12cm``); a lone word answer (``Monday``) is kept, and so
   is an operation on the value (``12 times the radius``).
9. A word ``or`` / ``and`` between spaces becomes a comma (a list; ``42 or 43`` is then a hedge that
   matches no single answer), and ``by`` between numbers (``5 by 8``); between relations ``and`` is
   their intersection, written ``∧``. In a list a word naming a value goes (``width 5, 8``), or, when
   several do, becomes a label compared name by name (``width=5,length=8``). A
   leading ``x =``, ``y=``, ``\\theta =``, ``f(x) =`` or ``x \\in`` is removed (one variable on the
   left) unless more equations follow (``a = 4, b = 8``, ``y = 3^2 = 9``); a leading ``=`` goes; other
   equations are kept and compared as equations.
10. Trailing punctuation (``.``, ``,``, ``;``, ``:``) and surrounding space are removed.
11. A mixed number written with a space (``2 1/2``) becomes ``2\\frac{1}{2}``; plain-text functions and
    constants get their backslash (``sqrt(18)``, ``25 pi``); then spaces are removed, except between
    words of a text answer (which then compares case-insensitively) and between two numbers that are
    not one number with a thousands group (``3\\,5`` is not ``35``).

Units are stripped, so ``units_differ`` tells the verdict when both answers end in a known measurement
unit and the units differ (``5 km`` is not ``5 m``).
12. One spelling for a few sets: ``\\varnothing``, ``\\{\\}`` → ``\\emptyset``; ``\\mathbb{R}``, "all real
    numbers", ``(-\\infty, +\\infty)`` → ``(-\\infty,\\infty)``; ``+\\infty`` → ``\\infty``.

    >>> normalize("$\\\\dfrac{3}{4}\\\\text{ m}^2$"), normalize("Five"), normalize("x >= -2")
    ('\\\\frac{3}{4}', '5', 'x\\\\geq-2')
"""

from __future__ import annotations

import re

from .words import FUNCTION_WORDS, SCALE_WORDS, fraction_words, number_words, unicode_math, unit_name

MAX_NORMALIZE_CHARS = 20_000  # beyond this only trivial clean-up is done (hostile or prose)

_COMMANDS = [
    ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\cfrac", "\\frac"), ("\\displaystyle", ""),
    ("\\left.", ""), ("\\right.", ""), ("\\left", ""), ("\\right", ""), ("\\bigl", ""), ("\\bigr", ""),
    ("\\Bigl", ""), ("\\Bigr", ""), ("\\big", ""), ("\\Big", ""), ("\\(", ""), ("\\)", ""), ("\\[", ""),
    ("\\]", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("{}^\\circ", ""), ("\\circ", ""), ("\\degree", ""),
    ("\\%", ""), ("%", ""), ("\\$", ""), ("$", ""), ("\\euro", ""), ("\\leqslant", "\\leq"),
    ("\\geqslant", "\\geq"), ("\\leqq", "\\leq"), ("\\geqq", "\\geq"), (">=", "\\geq "), ("<=", "\\leq "),
    ("!=", "\\neq "), ("\\not=", "\\neq "), ("\\lt", "<"), ("\\gt", ">"), ("{,}", ""), ("\\!", ""),
    ("\\,", " "), ("\\;", " "), ("\\:", " "), ("\\qquad", " "), ("\\quad", " "), ("~", " "),
    ("\\lbrace", "\\{"), ("\\rbrace", "\\}"), ("\\lvert", "|"), ("\\rvert", "|"), ("\\vert", "|"),
    ("\\mid", "|"), ("\\colon", ":"), ("\\cdotp", "\\cdot"), ("\\varnothing", "\\emptyset"),
]  # fmt: skip
_RELATIONS = [  # re.sub templates
    (re.compile(r"\\le(?![a-z])"), r"\\leq"), (re.compile(r"\\ge(?![a-z])"), r"\\geq"),
    (re.compile(r"\\ne(?![a-z])"), r"\\neq"),
    (re.compile(r"(?:(?<=\d)|(?<![\\A-Za-z]))sqrt\s+(\d+(?:\.\d+)?)(?![\d.])"), r"\\sqrt{\1}"),
]  # fmt: skip
_INVERSE_TRIG = re.compile(r"\\(sin|cos|tan|sec|csc|cot)\s*\^\s*\{?\s*-\s*1\s*\}?")
_SET_BUILDER = re.compile(r"^\\\{\s*([A-Za-z])\s*(?:\\in\s*\\mathbb\{?R\}?\s*)?(?:\||:)\s*(.+?)\s*\\\}$")
_TEXT_SETS = {"all real numbers": "(-\\infty,\\infty)", "no solution": "\\emptyset", "no solutions": "\\emptyset",
              "no real solutions": "\\emptyset", "there is no solution": "\\emptyset"}  # fmt: skip
_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textup|textsf|mathrm|mathbf|mathit|mathsf|mbox|hbox"
    r"|operatorname|boxed|fbox|emph)\s*\{([^{}]*)\}"
)
_TEXT_UNIT = re.compile(
    r"(?<=[\d}).\s])\s*\\(?:text|textnormal|textrm|mathrm|mbox)\s*\{\s*([A-Za-z][A-Za-z ./^\d-]{0,20})\}"
    r"\s*(?:\^\s*\{?[23]\}?)?\s*$"
)
_BARE_POWER = re.compile(r"\^(\d{2,})")  # plain-text 2^10 means 2^{10}
_MODULUS = re.compile(r"(?:\\pmod\s*\{?\s*\w+\s*\}?|\(\s*\\?b?mod\s*\{?\s*\w+\s*\}?\s*\))\s*$")
_BY = re.compile(r"(?<=\d)\s+by\s+(?=-?\d)")  # dimensions: "5 by 8" lists 5 and 8
_WORD_LABEL = re.compile(r"(?:^|(?<=,))\s*(?<![\\A-Za-z])([A-Za-z]{3,})\s+(?=-?\d)")  # "width 5, length 8"
_THOUSANDS_SPACED = re.compile(  # 4\,096, 4,\!096, 4,\! 096, 4{,}\!096: a separator before a group of three
    r"(?<=\d)(?:\\,|,[ \t]*\\!|\{,\}[ \t]*(?:\\!)?)[ \t]*(?=\d{3}(?!\d))"
)
_LATEX_DECIMAL_COMMA = re.compile(r"(?<=\d)\{,\}(?=\d{1,2}(?!\d)|\d{4,})")  # 3{,}75: not a group of three
_DECIMAL_COMMA = re.compile(r"(?<![\d,.])(-?\d+),(\d+)(?![\d,.])")
_LINE_BROKEN_DIGITS = re.compile(r"(\d)[ \t]*[\r\n]\s*(?=\d)")  # 1\n234: two numbers, never a thousands group
_GLUED_UNIT = re.compile(r"(?<=\d)([A-Za-z]{2,})\.?(?:\^\{?[23]\}?)?$")
_ELLIPSIS_END = re.compile(r",\s*(?:\.\.\.|\\[lc]?dots|…)\s*\.?$")  # "1, 2, 3, ...": the list goes on
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_THOUSANDS_BY_SPACE = re.compile(r"-?\d{1,3}(?: \d{3})+(?:\.\d+)?")
_UNIT = re.compile(
    r"(?<=\s)(?:(?:square|sq\.?|cubic)\s+)?[A-Za-z][A-Za-z']+\.?(?:\^\{?[23]\}?)?"
    r"(?:\s+(?:per|/)\s+[A-Za-z]+)?(?:\s+(?:and|of)\s+[A-Za-z]+)?\s*$"
)
_OPERATOR_WORDS = {"times", "plus", "minus", "over", "divided", "multiplied", "less", "more"}  # with an operand after
_KEEP_WORDS = {"pi", "infty", "sqrt", "frac", "sin", "cos", "tan", "log", "ln", "cot", "csc", "or", "and"}
_LEADING_VARIABLE = re.compile(
    r"^\s*(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+|[A-Za-z]\([A-Za-z]\))\s*(?:=|\\in(?![a-z]))(?!=)"
)
_LETTER = re.compile(r"[A-Za-z]")
_UNIT_TAIL = re.compile(r"\d\s*(square\s+|sq\.?\s+|cubic\s+)?([A-Za-z]+)\.?\s*(?:\^\s*\{?([23])\}?)?\s*$")
_MIXED = re.compile(r"^(-?\d+)[ \t]+(\d+)\s*/\s*(\d+)$")  # a line break is not a mixed number
_SPACE_BETWEEN_WORDS = re.compile(r"(?<=[A-Za-z])\s+(?=[A-Za-z])")
_SPACE = re.compile(r"\s+")
_SPACED_DIGITS = re.compile(  # two numbers a space apart (3 5), not \frac 1 2 or a thousands group
    r"(?<![\\A-Za-z] )(?<![\\A-Za-z{^_])(\d)\s+(?=\d)(?!\d{3}(?!\d))"
)
_OR_AND = re.compile(  # starts a run of spaces only: linear; "(11,7)or(7,11)" between brackets too
    r"(?<!\s)\s+(?:or|and)\s+|(?<=[)\]])(?:or|and)(?=[(\[])"
)
_AND = re.compile(r"(?<!\s)\s+and\s+|\\wedge(?![a-z])|\\land(?![a-z])")
_RELATION = re.compile(r"\\leq|\\geq|\\neq|<|>")
_BACKSLASH_SPACE = re.compile(r"(?<!\\)\\ ")  # "\ " is a space; "\\ " is a matrix row end and a space
_REALS = {"\\mathbb{R}", "\\mathbbR", "\\R", "allrealnumbers", "(-\\infty,\\infty)", "\\mathbb{r}"}
_EMPTY = {"\\{\\}", "\\emptyset", "{}", "\\O", "\\{\\emptyset\\}"}


def normalize(text: str, keep_variable: bool = False) -> str:
    """``text`` after the rules in the module docstring (linear time; never raises on a string);
    ``keep_variable`` keeps a leading ``y =`` (to compare an equation with an equation)."""
    text = text.strip()
    if len(text) > MAX_NORMALIZE_CHARS:
        return text
    text = _rewrite(text)
    text = _strip_outer_braces(_unwrap(text).strip())
    text = _INVERSE_TRIG.sub(r"\\arc\1 ", FUNCTION_WORDS.sub(r"\\\1 ", text))
    text = _set_builder(text)
    text = _numbers_in_words(text)
    text = _strip_units(text)
    text = _BY.sub(",", _or_and(text))
    text = _word_labels(text) if "," in text else text
    text = text if keep_variable else strip_variable(text)
    if text.startswith("=") and not text.startswith("=="):  # "area $= 50$": the label stayed in prose
        text = text[1:]
    text = _ELLIPSIS_END.sub(lambda _: ",\\ldots", text)  # kept: an element that matches nothing
    text = without_thousands(text.rstrip(" .,;:").strip())
    mixed = _MIXED.match(text)
    if mixed:
        text = f"{mixed.group(1)}\\frac{{{mixed.group(2)}}}{{{mixed.group(3)}}}"
    if _SPACE_BETWEEN_WORDS.search(text) and not re.search(r"[\d\\^_{}=]", text):
        text = _SPACE.sub(" ", text).lower()  # a text answer: keep word boundaries, ignore case
        return _TEXT_SETS.get(text, text)
    if "\n" in text or "\r" in text:
        text = _LINE_BROKEN_DIGITS.sub(r"\1\\,", text)
    spaced = _SPACED_DIGITS.sub(r"\1\\,", text) if " " in text or "\t" in text else text
    return _canonical(_SPACE.sub("", spaced))


def units_differ(pred: str, gold: str) -> bool:
    """Whether both answers end in a measurement unit and the units differ: units are stripped before
    comparing (``5 \\text{ cm}`` is ``5``), which must not make ``5 km`` equal ``5 m``.

    >>> units_differ("5 \\\\text{ km}", "5 m"), units_differ("5 cm^2", "5 square centimeters")
    (True, False)
    >>> units_differ("5 km", "5")
    False
    """
    gold_unit = _unit(gold)  # most golds have none: then the answer's is not read
    return gold_unit is not None and _unit(pred) not in (None, gold_unit)


def _unit(text: str) -> str | None:
    """The measurement unit ``text`` ends in (``cm^2`` for "12 square centimeters"), or ``None``."""
    if not _LETTER.search(text, max(0, len(text) - 40)):  # a plain number: no unit (most answers)
        return None
    tail = _unwrap(text[-80:].replace("$", " ")).replace("\\,", " ").replace("\\ ", " ").rstrip(" .")
    match = _UNIT_TAIL.search(tail)
    name = unit_name(match.group(2)) if match else None
    if name is None:
        return None
    power = match.group(3) or {"square": "2", "sq": "2", "cubic": "3"}.get((match.group(1) or "").strip(" ."))
    return f"{name}^{power}" if power else name


def _word_labels(text: str) -> str:
    """A list of values named by words: one name goes (``width 5, 8``); several become labels
    (``width=5,length=8``), compared name by name, so ``width 8, length 5`` is not ``width 5, length 8``."""
    names = {name.lower() for name in _WORD_LABEL.findall(text)}
    return _WORD_LABEL.sub(r"\1=" if len(names) > 1 else " ", text) if names else text


def _rewrite(text: str) -> str:
    """Rules 1–3 and 5–6: character and command rewrites, then wrapped trailing units (rule 4)."""
    text = unicode_math(text)
    text = _THOUSANDS_SPACED.sub("", text)
    if "{,}" in text:
        text = _LATEX_DECIMAL_COMMA.sub(".", text)
    for old, new in _COMMANDS:
        if old in text:
            text = text.replace(old, new)
    text = _BACKSLASH_SPACE.sub(" ", text)
    for pattern, new in _RELATIONS:
        text = pattern.sub(new, text)
    text = _BARE_POWER.sub(r"^{\1}", text)
    if "mod" in text:
        text = _residue(_MODULUS.sub("", text).rstrip())
    unit = _TEXT_UNIT.search(text, max(0, len(text) - 60))
    if unit and re.search(r"\d", text[: unit.start()]) and unit.group(1).strip() not in _KEEP_WORDS:
        scale = unit.group(1).split()[0]  # "3\text{ million units}": the scale is part of the number
        text = text[: unit.start()] + (f" {scale}" if scale in SCALE_WORDS else "")
    return text


def _residue(text: str) -> str:
    """A congruence states its residue: ``2^{100} \\equiv 2`` (its modulus gone) is ``2``, not an
    equation between a constant and the residue; several congruences read ``\\equiv`` as ``=``."""
    if text.count("\\equiv") == 1:
        return text[text.find("\\equiv") + len("\\equiv") :].strip()
    return text.replace("\\equiv", "=")


def _set_builder(text: str) -> str:
    """``\\{x \\mid x > 3\\}`` → ``x > 3``: a set described by a condition on one variable is the condition."""
    match = _SET_BUILDER.match(text) if text.startswith("\\{") else None
    return (
        match.group(2)
        if match and re.search(rf"(?<![A-Za-z\\]){match.group(1)}(?![A-Za-z])", match.group(2))
        else text
    )


def decimal_comma(text: str) -> str | None:
    """``text`` with its one comma read as a decimal comma (``3,75`` → ``3.75``, ``12,5 km``, ``0,125``),
    or ``None`` when that comma cannot be one: a comma with a space after it, or before a group of
    exactly three digits after a non-zero whole part (``4,096`` is a thousands separator), or a second
    comma (a list). The caller tries it only when the other side is one number, never a list.

    >>> decimal_comma("3,75"), decimal_comma("0,125"), decimal_comma("4,096"), decimal_comma("1, 22")
    ('3.75', '0.125', None, None)
    """
    if text.count(",") != 1:
        return None
    match = _DECIMAL_COMMA.search(text)
    if match is None or (len(match.group(2)) == 3 and match.group(1).lstrip("-") != "0"):
        return None
    return text[: match.start()] + f"{match.group(1)}.{match.group(2)}" + text[match.end() :]


def without_thousands(text: str) -> str:
    """``text`` without thousands separators when it is one number written with them (rule 6).

    >>> without_thousands("1,234,567"), without_thousands("1, 2")
    ('1234567', '1, 2')
    """
    stripped = text.strip()
    if _THOUSANDS.fullmatch(stripped):
        return stripped.replace(",", "")
    return stripped.replace(" ", "") if _THOUSANDS_BY_SPACE.fullmatch(stripped) else text


def _canonical(text: str) -> str:
    """Rule 12: one spelling for the empty set, the real line and plus infinity."""
    text = text.replace("+\\infty", "\\infty").replace("\\infinity", "\\infty")
    if text in _EMPTY:
        return "\\emptyset"
    return "(-\\infty,\\infty)" if text in _REALS else text


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


def _numbers_in_words(text: str) -> str:
    """Rule 7, for the whole answer or all of it but a trailing unit word (``five apples``)."""
    if not text[:1].isalnum() or len(text) > 80:
        return text
    digits = number_words(text) or fraction_words(text)
    if digits is not None:
        return digits
    head, _, unit = text.rpartition(" ")
    digits = number_words(head) if head and unit.isalpha() else None
    return f"{digits} {unit}" if digits is not None else text


def strip_variable(text: str) -> str:
    """``text`` without a leading ``x =`` / ``x \\in`` (rule 9), for each element of a list too; kept
    when more equations follow (``a = 4, b = 8`` keeps its labels; ``y = 3^2 = 9`` is a chain)."""
    match = _LEADING_VARIABLE.match(text)
    if match is None or (match.group().rstrip().endswith("=") and "=" in text[match.end() :]):
        return text.strip()
    return text[match.end() :].strip()


def _or_and(text: str) -> str:
    """``or``/``and`` between spaces list answers; between relations ``and`` is their intersection
    (``x \\leq 2 and x \\neq -1``), written ``∧``."""
    if _RELATION.search(text):
        text = _AND.sub(" ∧ ", text)
    return _OR_AND.sub(",", text)


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
    """Drop trailing unit words after a number or expression; keep a whole-word answer. A unit written
    against its number goes only when it is a measurement unit of two or more letters (``12cm``,
    ``1,000.99m^{2}``): ``3m`` may be a product with a variable."""
    glued = _GLUED_UNIT.search(text, max(0, len(text) - 20))
    if glued and unit_name(glued.group(1)) is not None:
        text = text[: glued.start()]
    for stripped in range(3):
        tail_start = max(0, len(text) - 80)  # units are short; searching only the tail keeps this linear
        match = _UNIT.search(text, tail_start)
        if not match or not re.search(r"\d", text[: match.start()]):
            return text
        words = set(re.findall(r"[A-Za-z]+", match.group()))
        if words & _KEEP_WORDS or (stripped and words & _OPERATOR_WORDS):  # "12 times the radius" is no 12
            return text
        text = text[: match.start()].rstrip()
    return text
