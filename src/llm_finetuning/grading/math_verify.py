"""math-verify as the grader (``grader: math_verify``): the verdict most published GRPO figures use (TRL's
``accuracy_reward``, open-r1, lighteval), so a run's numbers can be compared with theirs.

math-verify parses LaTeX and expressions with sympy in the calling process, bounded by ``signal.alarm``, which
only works in a main thread. Here it runs in a sandbox worker (``sandbox/``), as our own sympy does: a deadline per
verdict, memory and CPU limits, killed and replaced when it overruns. The answer it reads is the text in the answer
slot (``<SOLUTION>…</SOLUTION>``, found by our extraction) when the completion has one, else the whole completion,
as math-verify reads a free-form answer; the gold is parsed as ``$gold$``, as its documentation shows. Needs the
``math-verify`` extra (``uv sync --extra math-verify``).
"""

from __future__ import annotations

import importlib.util
import logging

from ..sandbox import Service, Worker, parsers
from .extract import answer_slot

__all__ = ["INSTALL", "grade", "is_equivalent", "problem"]

INSTALL = "uv sync --extra math-verify"
TIMEOUT_S = 10.0  # per verdict: parsing and verifying, both (math-verify's own limits are 5 s each)


def problem() -> str | None:
    """Why math-verify cannot grade here (not installed), with the fix; None when it can."""
    return None if importlib.util.find_spec("math_verify") else f"needs the math-verify package: {INSTALL}"


def grade(completion: str, gold: str, solution_start: str = "<SOLUTION>", solution_end: str = "</SOLUTION>",
          timeout: float = TIMEOUT_S) -> bool:  # fmt: skip
    """math-verify's verdict on the completion's answer (its slot, else the completion) against ``gold``."""
    if not isinstance(completion, str):
        return False
    slot = answer_slot(completion, solution_start, solution_end)
    return is_equivalent(slot[0] if slot else completion, gold, timeout)


def is_equivalent(answer: str, gold: str, timeout: float = TIMEOUT_S) -> bool:
    outcome = _WORKER.call([str(answer), str(gold)], max(timeout, TIMEOUT_S))
    return bool(outcome.value) if outcome.ok else False


def _verify(request: list[str]) -> bool:
    from math_verify import parse, verify

    answer, gold = request
    return bool(verify(parse(f"${gold}$", parsing_timeout=5), parse(answer, parsing_timeout=5), timeout_seconds=5))


def _warm_up() -> None:
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it logs every timeout
    parsers.reads_model_text("math_verify", "latex2sympy2_extended")
    _verify(["\\frac{1}{2}", "0.5"])


def _always(request: list[str]) -> bool:
    return True  # math-verify is third-party code reading model text: every verdict in a fresh copy


SERVICE = Service(handle=_verify, warm_up=_warm_up, isolated=_always)
_WORKER = Worker(__name__)
