"""The math answer grader shared by training rewards and evaluation: extract, normalise, compare.

    >>> grade("so the area is 14/4 <SOLUTION>\\\\frac{7}{2}</SOLUTION>", "3.5")
    True
    >>> grade("<SOLUTION>0.33</SOLUTION>", "\\\\frac{1}{3}")
    False

**Extraction** (``extract_answer``) takes the answer slot, first found wins: the last
``<SOLUTION>…</SOLUTION>`` (tags configurable), the last ``<answer>…</answer>``, the last ``\\boxed{}``
or ``\\fbox{}`` (nested braces), the last ``#### N`` line, the last "the (final) answer is …". A slot
that opens but never closes (a cut-off completion) or an unbalanced ``\\boxed{`` gives ``None``; a
``\\boxed{}`` inside a tag slot is unwrapped. There is no fallback to the last number in the text.

**Normalisation** (``math_normalize``, applied to both sides): Unicode math to LaTeX; ``$``,
``\\(``/``\\)``, ``\\[``/``\\]``, ``\\left``/``\\right``, ``\\displaystyle`` and an outer ``\\boxed``
removed; ``\\dfrac``/``\\tfrac`` → ``\\frac``; ``\\text{}``-like wrappers unwrapped; degrees,
percent and dollar signs removed (stripped, not interpreted); thousands separators removed; LaTeX
spacing removed; trailing unit words removed; a leading ``x =`` / ``x \\in`` removed; trailing
punctuation removed; ``2 1/2`` read as a mixed number; spaces removed (text answers keep single spaces
and compare case-insensitively). A gold written in a base (``1011_2``) needs the same digits; the
subscript may be dropped.

**Comparison** (``math_compare``): solution lists, sets and unions are unordered multisets; tuples,
vectors, matrices and intervals are ordered and their brackets must match (``x > 3`` is
``(3, \\infty)``); equations match side by side or up to a constant factor; scalars are equal as text,
then by exact rational value (integers, decimals, fractions, mixed numbers ``2\\frac12``, scientific
notation, repeating decimals ``0.\\overline{3}``, powers and factorials within a size guard), then by
sympy. Equality is exact, never within a tolerance: ``0.33`` ≠ ``1/3``, ``3.14`` ≠ ``\\pi``.

**Time bound**: string work is linear; exact arithmetic refuses results over ~6,000 digits; sympy runs
in a worker process that is killed and replaced when it exceeds ``timeout`` (``math_symbolic``), with
guards that keep towers, huge powers and factorials away from it. The worker starts in the background
on the first comparison; a symbolic comparison that finds it still starting is "not equal" (call
``warm_up()`` first where the very first cases matter). Nothing here raises: an internal error is a
"not equal".
"""

from __future__ import annotations

import logging
import math
import re

from . import compare, symbolic
from .normalize import normalize

logger = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 5_000  # a longer slot is compared as text only
_BOXED = ("\\boxed", "\\fbox")
_ANSWER_IS = re.compile(r"(?:final answer|the answer)\s*(?:is|:)\s*:?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")
_BASE = re.compile(r"^([0-9A-Za-z]+)_\{?(\d+)\}?$")
_BASE_PRED = re.compile(r"^([0-9A-Za-z]+)(?:_\{?(\d+)\}?)?$")


def extract_answer(
    completion: str, solution_start: str = "<SOLUTION>", solution_end: str = "</SOLUTION>"
) -> str | None:
    """The text in the completion's answer slot (see the module docstring), or ``None``.

    >>> extract_answer("x = 2 or 3 ... \\\\boxed{\\\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    >>> extract_answer("<SOLUTION>42") is None
    True
    """
    try:
        if not isinstance(completion, str):
            return None
        for opening, closing in ((solution_start, solution_end), ("<answer>", "</answer>")):
            if opening and closing and opening in completion:
                return _tagged(completion, opening, closing)
        if any(box in completion for box in _BOXED):
            return last_boxed(completion)
        if "####" in completion:
            line = completion[completion.rfind("####") + 4 :].strip().split("\n", 1)[0]
            return line.strip() or None
        return _answer_is(completion)
    except Exception:  # untrusted text must never break a reward
        logger.debug("answer extraction failed", exc_info=True)
        return None


def _tagged(completion: str, opening: str, closing: str) -> str | None:
    start = completion.rfind(opening) + len(opening)
    end = completion.find(closing, start)
    if end < 0:
        return None  # cut off before the slot closed
    slot = completion[start:end]
    if any(box in slot for box in _BOXED):
        return last_boxed(slot)
    return slot.strip() or None


def last_boxed(text: str) -> str | None:
    """The contents of the last ``\\boxed{…}``/``\\fbox{…}`` (nested braces), or ``None`` if it
    never closes; ``\\boxed 5`` (no braces) gives ``5``."""
    start = max(text.rfind(box) for box in _BOXED)
    at = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    rest = text[at:]
    if rest.startswith(" ") and rest.strip():
        return rest.split()[0].rstrip("$.") or None
    if not rest.startswith("{"):
        return None
    depth = 0
    for index, char in enumerate(rest):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return rest[1:index].strip() or None
    return None


def _answer_is(completion: str) -> str | None:
    matches = list(_ANSWER_IS.finditer(completion[-20_000:]))
    if not matches:
        return None
    rest = completion[-20_000:][matches[-1].end() :]
    end = _SENTENCE_END.search(rest)
    answer = (rest[: end.start()] if end else rest).strip().strip("*").strip()
    return answer or None


def is_equivalent(pred: str, gold: str, timeout: float = 1.0) -> bool:
    """Whether answer ``pred`` equals gold answer ``gold`` under the conventions above.

    >>> is_equivalent("14/4", "3.5"), is_equivalent("25\\\\%", "0.25")
    (True, False)
    >>> warm_up(); is_equivalent("(x+1)^2", "x^2+2x+1")
    True
    """
    try:
        if not symbolic.started():
            symbolic.start()  # warm sympy up in the background while the fast path runs
        if not isinstance(pred, str) or not isinstance(gold, str):
            pred, gold = str(pred), str(gold)
        gold = _gold_slot(gold)
        if pred.strip() == gold.strip():
            return bool(pred.strip())
        if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
            return False
        pred, gold = normalize(pred), normalize(gold)
        if not pred or not gold:
            return False
        if pred == gold:
            return True
        base = _BASE.match(gold)
        if base:
            return _same_digits(pred, base)
        return compare.equal(compare.parse(pred), compare.parse(gold), timeout)
    except Exception:  # never raise on untrusted text; unknown means not equal
        logger.debug("equivalence check failed", exc_info=True)
        return False


def _gold_slot(gold: str) -> str:
    """A gold given as a worked solution (GSM8K ``#### 72``, MATH ``\\boxed{}``) reduced to its answer."""
    if "####" in gold:
        return gold[gold.rfind("####") + 4 :].strip()
    if any(box in gold for box in _BOXED):
        return last_boxed(gold) or gold
    return gold


def _same_digits(pred: str, base: re.Match) -> bool:
    """A gold in base b (``1011_2``): the same digits, with the subscript optional but not another."""
    match = _BASE_PRED.match(pred)
    if not match or (match.group(2) and match.group(2) != base.group(2)):
        return False
    return match.group(1).upper() == base.group(1).upper()


def warm_up() -> None:
    """Start the sympy worker and wait until it is ready (seconds, once per process). Optional: a
    symbolic comparison that finds the worker still starting counts as "not equal", so call this
    before an evaluation or benchmark whose first cases must be judged exactly."""
    symbolic.start(wait=True)


def grade(
    completion: str,
    gold: str,
    solution_start: str = "<SOLUTION>",
    solution_end: str = "</SOLUTION>",
    timeout: float = 1.0,
) -> bool:
    """Extract the completion's answer and compare it with ``gold``; ``False`` when there is none."""
    answer = extract_answer(completion, solution_start, solution_end)
    return answer is not None and is_equivalent(answer, gold, timeout)


# A number: digits with optional thousands separators and decimals, or a bare decimal (.5).
_NUMBER = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")


def first_number(text: str, start: int = 0) -> float | None:
    """The first number in ``text[start:]`` with thousands separators removed, or ``None``.

    >>> first_number("so x = 1,234.5 and 7")
    1234.5
    """
    match = _NUMBER.search(text, start)
    return float(match.group().replace(",", "")) if match else None


def parse_number(text: str) -> float | None:
    """``text`` as a finite number (thousands separators allowed: ``1,234``), or ``None``."""
    try:
        value = float(text.strip().replace(",", ""))
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None
