"""The verdict: is a completion's answer (or an answer) equal to the gold answer?

``grade(completion, gold)`` finds the completion's answer slot, reads the final answer(s) in it and in
the gold with the same rules (``extract``), normalises both (``normalize``) and compares their
structure and values (``compare``). A run of several boxed answers is compared as a set when the gold
lists several answers (or as a tuple against a tuple of that length), and only its last box otherwise;
when the gold lists n answers and the last run has fewer boxes, the last n boxes of the slot are
taken (answers boxed in separate places: "(a) \\boxed{5} … (b) \\boxed{7}"). An answer ``A \\approx B``
matches when either side does; an answer whose leading ``y =`` normalisation removed is compared again
as the equation it was when the other side is an equation (``y = -2x + 5`` = ``2x + y = 5``). Equal
values with two different measurement units are not equal (``5 km``, ``5 m``), and a relation on a
function value is not one on its argument (``f(x) > 2``, ``x > 2``).
Nothing here raises: an internal error is "not equal". ``timeout`` is one budget of sympy time for the
whole verdict, however many comparisons a list or an equation takes (``symbolic.budget``).

``start_worker()`` starts the sympy worker in the background (cheap, returns at once); graders call it
when they are built (``build_rewards``, the evaluator), so the worker is ready long before training
or evaluation asks for it. ``warm_up()`` also waits until it is ready. Most comparisons never need
sympy (exact arithmetic and ``numeric`` settle them), so a bare ``grade()`` starts no process; one
that does need sympy starts the worker if nobody has and waits for it, so a cold process gives the
same verdicts as a warm one. Try ``python -m llm_finetuning.grading.judge "\\frac{1}{2}" "0.5"``.
"""

from __future__ import annotations

import logging
import re
import sys

from . import compare, relations, symbolic
from .extract import answer_slot, final_answers, last_boxes
from .normalize import decimal_comma, normalize, units_differ

logger = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 5_000  # a longer answer is compared as text only
_BASE = re.compile(r"^([0-9A-Za-z]+)_\{?(\d+)\}?$")
_BASE_PRED = re.compile(r"^([0-9A-Za-z]+)(?:_\{?(\d+)\}?)?$")


GRADERS = ("ours", "math_verify")  # grader: which verdict the rewards and evaluation use
_selected = {"grader": "ours"}


def use_grader(name: str) -> None:
    """Make ``name`` the verdict of ``grade`` and ``is_equivalent`` in this process (the config's ``grader``)."""
    from ..errors import PipelineError
    from . import math_verify

    if name not in GRADERS:
        raise PipelineError(f"grader: unknown {name!r}; one of {', '.join(GRADERS)}")
    if name == "math_verify" and (missing := math_verify.problem()):
        raise PipelineError(f"grader: math_verify {missing}")
    _selected["grader"] = name


def is_equivalent(pred: str, gold: str, timeout: float = 1.0) -> bool:
    """Whether the answer ``pred`` equals the gold answer ``gold`` (both read as answer slots).

    >>> is_equivalent("14/4", "3.5"), is_equivalent("25\\\\%", "0.25")
    (True, False)
    >>> is_equivalent("(x+1)^2", "x^2+2x+1"), is_equivalent("The result is 36.", "36")
    (True, True)
    """
    if _selected["grader"] == "math_verify":
        from . import math_verify

        return math_verify.is_equivalent(_text(pred), _text(gold))
    try:
        with symbolic.budget(timeout):
            return _matches(_text(pred), final_answers(_text(pred)), _text(gold), timeout)
    except Exception:  # never raise on untrusted text; unknown means not equal
        logger.debug("equivalence check failed", exc_info=True)
        return False


def grade(
    completion: str,
    gold: str,
    solution_start: str = "<SOLUTION>",
    solution_end: str = "</SOLUTION>",
    timeout: float = 1.0,
) -> bool:
    """Extract the completion's answer and compare it with ``gold``; ``False`` when there is none.

    >>> grade("so the area is 14/4 <SOLUTION>\\\\frac{7}{2}</SOLUTION>", "3.5")
    True
    >>> grade("<SOLUTION>0.33</SOLUTION>", "\\\\frac{1}{3}"), grade("the sum is 4", "4")
    (False, False)
    """
    if _selected["grader"] == "math_verify":
        from . import math_verify

        return math_verify.grade(completion, _text(gold), solution_start, solution_end)
    try:
        if not isinstance(completion, str):
            return False
        slot = answer_slot(completion, solution_start, solution_end)
        with symbolic.budget(timeout):
            return slot is not None and _matches(slot[0], final_answers(*slot), _text(gold), timeout)
    except Exception:  # never raise on untrusted text
        logger.debug("grading failed", exc_info=True)
        return False


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _matches(slot: str, answers: list[str], gold: str, timeout: float) -> bool:
    """``answers`` (one, or a run of boxes, read from ``slot``) against the gold text, by the rule in
    the module docstring."""
    golds = final_answers(gold)
    if not answers or not golds:
        return False
    gold = ", ".join(golds)
    structure = compare.parse(normalize(gold)) if len(gold) <= MAX_ANSWER_CHARS else None
    wanted = len(structure.items) if isinstance(structure, (compare.Bag, compare.Seq)) else 1
    if len(answers) == 1:
        if _equal(answers[0], gold, timeout):
            return True
        if wanted == 1 or "\\boxed" not in slot:
            return False
    if len(answers) < wanted and "\\boxed" in slot:
        answers = last_boxes(slot, wanted)  # the gold's answers boxed in separate places
    if len(answers) < 2:
        return False
    if isinstance(structure, compare.Seq) and len(structure.items) == len(answers):
        return _equal(structure.opening + ", ".join(answers) + structure.closing, gold, timeout)
    several = isinstance(structure, compare.Bag) and wanted > 1
    return _equal(", ".join(answers) if several else answers[-1], gold, timeout)


def _equal(pred: str, gold: str, timeout: float) -> bool:
    """Equal values, and not two different units stripped away (``5 km`` is not ``5 m``)."""
    return _same_value(pred, gold, timeout) and not units_differ(pred, gold)


def _same_value(pred: str, gold: str, timeout: float) -> bool:
    if pred.strip() == gold.strip():
        return bool(pred.strip())
    if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
        return False
    if "\\approx" in pred:  # "36\pi \approx 113.1" states both the exact value and its rounding
        sides = [side for side in pred.split("\\approx")[:2] if side.strip()]
        return any(_equal(side, gold, timeout) for side in sides)
    normal_pred, normal_gold = normalize(pred), normalize(gold)
    if not normal_pred or not normal_gold:
        return False
    if normal_pred == normal_gold:
        return True
    base = _BASE.match(normal_gold)
    if base:
        return _same_digits(normal_pred, base)
    if relations.about_argument(normal_pred, normal_gold):  # f(x) > 2 is not x > 2
        return False
    pred_structure, gold_structure = compare.parse(normal_pred), compare.parse(normal_gold)
    if compare.equal(pred_structure, gold_structure, timeout):
        return True
    # One number against the other side: its "3,75" is that number written with a decimal comma.
    if isinstance(gold_structure, str) and (comma := decimal_comma(pred)) is not None:
        return _same_value(comma, gold, timeout)
    if isinstance(pred_structure, str) and (comma := decimal_comma(gold)) is not None:
        return _same_value(pred, comma, timeout)
    if "=" not in normal_pred + normal_gold:
        return False
    # An equation against an answer whose leading "y =" was removed: compare the two equations.
    labelled = normalize(pred, keep_variable=True), normalize(gold, keep_variable=True)
    return labelled != (normal_pred, normal_gold) and compare.equal(*map(compare.parse, labelled), timeout)


def _same_digits(pred: str, base: re.Match) -> bool:
    """A gold in base b (``1011_2``): the same digits, with the subscript optional but not another."""
    match = _BASE_PRED.match(pred)
    if not match or (match.group(2) and match.group(2) != base.group(2)):
        return False
    return match.group(1).upper() == base.group(1).upper()


def start_worker() -> None:
    """Start the sympy worker in the background if it is not running; returns at once. Call it when
    a grader is built (``build_rewards`` does) or graded problems are about to be judged
    (``tasks.start_judges``: an evaluation as it starts generating)."""
    symbolic.start()


def warm_up() -> None:
    """Start the sympy worker and wait until it is ready (seconds, once per process)."""
    symbolic.start(wait=True)


if __name__ == "__main__":
    print(is_equivalent(sys.argv[1], sys.argv[2]) if len(sys.argv) == 3 else __doc__)
