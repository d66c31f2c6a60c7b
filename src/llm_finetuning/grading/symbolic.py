"""Symbolic equality with sympy, in a worker process that is killed when it overruns.

sympy can run for minutes (or forever) on innocent-looking input, and no Python-level timeout can
stop it: ``signal.alarm`` only works in the main thread, and ``Pool.get(timeout=…)`` leaves the
stuck worker running so every later call times out too. So one persistent worker process does the
sympy work (a ``sandbox.Worker`` serving this module's ``SERVICE``); a call that overruns kills it and a
warm spare takes its place, so the next call finds a fresh worker. The worker is confined like every
sandbox worker (``sandbox/confine.py``): a memory and a CPU-time limit, no files, no processes, and it
dies with the trainer.

No verdict depends on how long the worker took to start: a call that finds it still starting (importing
sympy takes seconds, once per process) waits for it, up to ``STARTUP_TIMEOUT_S``, and its ``timeout``
counts from the moment the worker is ready. ``start()`` begins that start in the background; graders
call it when they are built.

A grade spends one budget on all of its sympy calls: inside ``budget(seconds)`` every ``equal`` gets at
most what is left of it, so a list of 64 items against another costs one completion its budget, not
64 × 64 timeouts.

``SAFE_NAMES`` is the grader's one list of the sympy names an expression may use: ``expr.to_python``
(and ``matrices``, for ``Matrix``) emits nothing else, and the worker refuses anything else before
``parse_expr`` (which calls ``eval``). The worker's comparisons are a registry, ``_RELATIONS``:
expressions equal, equations proportional, matrices the same.
``equal(a, b, timeout)`` takes two ``expr.to_python`` strings and returns True, False, or None when
sympy could not decide in time. Try ``python -m llm_finetuning.grading.symbolic``.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import time
from collections.abc import Iterator
from typing import Any

from ..sandbox import Service, Worker

STARTUP_TIMEOUT_S = 60.0  # the most a call waits for a worker still importing sympy (not a verdict bound)
MEMORY_HEADROOM_BYTES = (
    768 << 20
)  # what the worker may allocate past sympy's import: a hostile expression fails
SAFE_NAMES = frozenset({
    "pi", "oo", "E", "I", "sqrt", "root", "factorial", "binomial", "Abs", "sin", "cos", "tan", "sec",
    "csc", "cot", "asin", "acos", "atan", "asec", "acsc", "acot", "sinh", "cosh", "tanh", "log", "exp",
    "Matrix",
})  # fmt: skip
_SAFE = re.compile(r"^[\w\s+\-*/(),.]*$")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

_WORKER = Worker(__name__, startup_timeout_s=STARTUP_TIMEOUT_S)
_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("sympy_budget", default=None)


def equal(a: str, b: str, timeout: float = 1.0, relation: str = "equal") -> bool | None:
    """Whether sympy proves the expressions ``a`` and ``b`` equal (``relation="equal"``), the
    equations ``a = 0`` and ``b = 0`` the same (``"proportional"``) or two matrix expressions the
    same matrix (``"matrix"``); None when that is not known within ``timeout`` seconds (counting any
    wait for another thread's call, not the worker's start), or within what is left of the enclosing
    ``budget``."""
    if not _WORKER.ready():
        _WORKER.start(wait=True)  # the worker's start is not the comparison's time
    shared = _BUDGET.get()
    if shared is not None:
        timeout = min(timeout, shared.left)
        if timeout <= 0:
            return None
    started_at = time.monotonic()
    outcome = _WORKER.call([relation, a, b], timeout)
    if shared is not None:
        shared.left -= time.monotonic() - started_at
    return bool(outcome.value) if outcome.ok else None


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.left = seconds


@contextlib.contextmanager
def budget(seconds: float) -> Iterator[None]:
    """Every ``equal`` inside spends from one budget of ``seconds`` (inside another budget, that one)."""
    if _BUDGET.get() is not None:
        yield
        return
    token = _BUDGET.set(_Budget(seconds))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def start(wait: bool = False) -> None:
    """Start the worker if none is running and return at once; with ``wait``, also wait until it is
    ready (at most ``STARTUP_TIMEOUT_S``)."""
    _WORKER.start(wait=wait)


def shutdown() -> None:
    """Stop the worker (also run at interpreter exit)."""
    _WORKER.shutdown()


def started() -> bool:
    """Whether a worker process exists (ready or still starting)."""
    return _WORKER.started()


def _warm_up() -> None:
    """Import sympy and run each kind of comparison once before the worker says it is ready: sympy loads
    much of itself lazily, and the first simplify would otherwise cost a real comparison ~0.3 s."""
    _compare("equal", "sqrt(8)+v_x", "2*sqrt(2)+v_x")
    _compare("equal", "sin(v_x)**(2)+cos(v_x)**(2)", "1")
    _compare("proportional", "2*v_x+2*v_y-10", "v_x+v_y-5")
    _compare("matrix", "Matrix(2,2,(2,1,1,1))**(-1)*Matrix(2,1,(1,v_x))", "Matrix(2,1,(1-v_x,2*v_x-1))")


def _handle(request: list[str]) -> bool:
    """The worker's answer to ``[relation, a, b]``; unparsable or unsupported: not provably equal."""
    try:
        return bool(_compare(*request))
    except Exception:  # noqa: BLE001
        return False


def _compare(relation: str, a: str, b: str) -> bool:
    return _RELATIONS[relation](_parse(a), _parse(b))


def _equal(left: Any, right: Any) -> bool:
    import sympy

    difference = left - right
    if difference == 0 or sympy.expand(difference) == 0 or sympy.simplify(difference) == 0:
        return True
    return not difference.free_symbols and difference.equals(0) is True


def _proportional(left: Any, right: Any) -> bool:
    import sympy

    if left == 0 or right == 0:
        return False
    ratio = sympy.simplify(left / right)
    return bool(ratio.is_number and ratio != 0 and ratio.is_finite)


def _same_matrix(left: Any, right: Any) -> bool:
    """Two matrices of one shape (a row and a column of one length count as the same vector) with
    equal entries."""
    import sympy

    if not (isinstance(left, sympy.MatrixBase) and isinstance(right, sympy.MatrixBase)):
        return False
    if left.shape != right.shape:
        if 1 not in left.shape or 1 not in right.shape or len(left) != len(right):
            return False
        left, right = left.reshape(len(left), 1), right.reshape(len(right), 1)
    return all(_equal(a, b) for a, b in zip(left, right))


_RELATIONS = {"equal": _equal, "proportional": _proportional, "matrix": _same_matrix}


def _parse(expression: str) -> Any:
    """Parse an ``expr.to_python`` string; anything but its closed vocabulary is refused, so
    ``parse_expr``'s ``eval`` only ever sees arithmetic."""
    import sympy
    from sympy.parsing.sympy_parser import parse_expr

    names = set(_IDENTIFIER.findall(expression))
    if not _SAFE.match(expression) or any(n not in SAFE_NAMES and not n.startswith("v_") for n in names):
        raise ValueError("outside the expression vocabulary")
    local = {name: getattr(sympy, name) for name in SAFE_NAMES}
    local.update({n: sympy.Symbol(n) for n in names if n.startswith("v_")})
    return parse_expr(expression, local_dict=local, global_dict={"Integer": sympy.Integer})


SERVICE = Service(handle=_handle, warm_up=_warm_up, headroom_bytes=MEMORY_HEADROOM_BYTES)


if __name__ == "__main__":
    print("sqrt(8) == 2*sqrt(2):", equal("sqrt(8)", "2*sqrt(2)"))
    started_at = time.perf_counter()
    print("a stuck comparison:", equal("factorial(factorial(20))", "1", timeout=0.5))
    print(f"  returned after {time.perf_counter() - started_at:.2f} s; next:", equal("1/2", "(2/4)"))
