"""Vocabulary the normaliser rewrites: Unicode math, superscripts, number words, function words.

>>> number_words("twenty-five"), number_words("3 million"), number_words("five apples")
('25', '3000000', None)
>>> superscripts("x² + y⁻¹")
'x^{2} + y^{-1}'
"""

from __future__ import annotations

import re
from fractions import Fraction

UNICODE = {
    "−": "-", "–": "-", "—": "-", "×": "\\times ", "÷": "\\div ", "·": "\\cdot ", "⋅": "\\cdot ",
    "π": "\\pi ", "√": "\\sqrt ", "∞": "\\infty ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\neq ",
    "∪": "\\cup ", "∩": "\\cap ", "∈": "\\in ", "∅": "\\emptyset ", "ℝ": "\\mathbb{R}", "±": "\\pm ",
    "∓": "\\mp ", "°": "^\\circ", "θ": "\\theta ", "α": "\\alpha ", "β": "\\beta ", "′": "'",
    "€": "", "£": "", "¥": "", "½": "\\frac{1}{2}", "⅓": "\\frac{1}{3}", "⅔": "\\frac{2}{3}",
    "¼": "\\frac{1}{4}", "¾": "\\frac{3}{4}", "⅕": "\\frac{1}{5}", "⅙": "\\frac{1}{6}",
    "⅛": "\\frac{1}{8}", "⅜": "\\frac{3}{8}", "⅝": "\\frac{5}{8}", "⅞": "\\frac{7}{8}",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ",
}  # fmt: skip
_SUPERSCRIPT = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+", strict=True))
_SUPERSCRIPT_RUN = re.compile("[" + "".join(_SUPERSCRIPT) + "]+")

# Words models write for functions and constants, given their backslash (longest first).
FUNCTION_WORDS = re.compile(
    r"(?<![\\A-Za-z])(arcsin|arccos|arctan|sqrt|sin|cos|tan|cot|csc|ln|log|exp|pi|infty|infinity)"
    r"(?![A-Za-z])"
)

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90,
}  # fmt: skip
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
SCALE_WORDS = frozenset({"hundred", *_SCALES})  # a multiplier, never a unit: 3 \text{ million}
_NUMERAL = re.compile(r"\d+(?:\.\d+)?")


_ROOT_OF_NUMBER = re.compile(r"√\s*(\d+(?:\.\d+)?)")


def unicode_math(text: str) -> str:
    """Unicode math as LaTeX (``UNICODE``); ``√18`` is the root of the whole number, ``x²`` a power."""
    if "√" in text:
        text = _ROOT_OF_NUMBER.sub(r"\\sqrt{\1}", text)
    for char, latex in UNICODE.items():
        if char in text:
            text = text.replace(char, latex)
    return superscripts(text)


def superscripts(text: str) -> str:
    """Runs of Unicode superscripts as a LaTeX power: ``x²`` → ``x^{2}``."""
    return _SUPERSCRIPT_RUN.sub(lambda m: "^{" + "".join(_SUPERSCRIPT[c] for c in m.group()) + "}", text)


_DENOMINATORS = {
    "half": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10,
}  # fmt: skip
FRACTION_WORDS = (  # a regex for prose: "one half", "a third", "two-thirds", "three quarters"
    r"(?:a|one|two|three|four|five|six|seven|eight|nine|ten)[ -]+(?:halves|half|(?:"
    + "|".join(word for word in _DENOMINATORS if word != "half") + r")s?)"
)


def fraction_words(text: str) -> str | None:
    """``text`` as a LaTeX fraction when it is a fraction in words (``one half``, ``a third``,
    ``two-thirds``, ``three quarters``), else ``None``.

    >>> fraction_words("one half"), fraction_words("two-thirds"), fraction_words("half an hour")
    ('\\\\frac{1}{2}', '\\\\frac{2}{3}', None)
    """
    words = re.split(r"[\s-]+", text.lower().strip())
    if len(words) != 2:
        return None
    numerator = 1 if words[0] == "a" else _SMALL.get(words[0])
    plural = words[1].endswith("s")  # "one third", "two thirds": the number agrees with the noun
    denominator = _DENOMINATORS.get("half" if words[1] == "halves" else words[1].removesuffix("s"))
    if not numerator or denominator is None or plural != (numerator > 1):
        return None
    return f"\\frac{{{numerator}}}{{{denominator}}}"


def number_words(text: str) -> str | None:
    """``text`` as digits when it is a number in words (``five``, ``twenty-five``, ``one hundred and
    two``, ``3 million``, ``1.5 billion``), else ``None``."""
    words = [w for w in re.split(r"[\s-]+", text.lower().strip()) if w and w != "and"]
    if not words or len(words) > 12 or all(_NUMERAL.fullmatch(w) for w in words):
        return None
    total, current = Fraction(0), Fraction(0)
    for index, word in enumerate(words):
        if index == 0 and _NUMERAL.fullmatch(word):
            current = Fraction(word)
        elif word in _SMALL or word in _TENS:
            current += _SMALL.get(word, 0) + _TENS.get(word, 0)
        elif word == "hundred":
            current = (current or 1) * 100
        elif word in _SCALES:
            total, current = total + (current or 1) * _SCALES[word], Fraction(0)
        else:
            return None
    value = total + current
    return str(value.numerator) if value.denominator == 1 else None


_UNIT_SPELLINGS = {  # a few measurement units and their spellings, to tell two units apart
    "mm": ("millimeter", "millimetre"), "cm": ("centimeter", "centimetre"), "m": ("meter", "metre"),
    "km": ("kilometer", "kilometre"), "in": ("inch",), "ft": ("foot", "feet"), "yd": ("yard",),
    "mi": ("mile",), "mg": ("milligram",), "g": ("gram",), "kg": ("kilogram",), "lb": ("pound", "lbs"),
    "oz": ("ounce",), "ml": ("milliliter", "millilitre"), "l": ("liter", "litre"),
    "s": ("second", "sec"), "min": ("minute",), "h": ("hour", "hr"), "day": (), "week": (),
    "month": (), "year": ("yr",),
}  # fmt: skip
UNITS = {spelling: unit for unit, others in _UNIT_SPELLINGS.items() for spelling in (unit, *others)}


def unit_name(word: str) -> str | None:
    """One name for a measurement unit in any of its spellings, singular or plural; ``None`` for a
    word that is no unit the grader knows.

    >>> unit_name("Centimeters"), unit_name("inches"), unit_name("km"), unit_name("apples")
    ('cm', 'in', 'km', None)
    """
    word = word.lower()
    for candidate in (word, word.removesuffix("s"), word.removesuffix("es")):
        if candidate in UNITS:
            return UNITS[candidate]
    return None
