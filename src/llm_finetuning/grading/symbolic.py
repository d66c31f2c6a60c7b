"""Symbolic equality with sympy, in a worker process that is killed when it overruns.

sympy can run for minutes (or forever) on innocent-looking input, and no Python-level timeout can
stop it: ``signal.alarm`` only works in the main thread, and ``Pool.get(timeout=…)`` leaves the
stuck worker running so every later call times out too. So one persistent worker process does the
sympy work; a call that overruns kills it and starts a replacement at once (and, from then on, keeps
a warm spare), so the next call finds a fresh worker. A module-level lock serialises calls, which
makes this safe from worker threads; the process handle lives only in this module, so rewards that
use it stay picklable.

No verdict depends on timing: a call that finds the worker still starting (importing sympy takes
seconds, once per process) waits for it, up to ``STARTUP_TIMEOUT_S``, and its ``timeout`` counts from
the moment the worker is ready. ``start()`` begins that start in the background; graders call it
when they are built.

The worker is this file run as a script (``python symbolic.py --serve``) talking JSON lines over its
stdin/stdout, not a ``multiprocessing`` spawn/forkserver child: those re-import the caller's
``__main__`` in the child, so a training script without an ``if __name__ == "__main__"`` guard would
run again inside the grader. The script needs only sympy and the standard library.

``SAFE_NAMES`` is the grader's one list of the sympy names an expression may use: ``expr.to_python``
(and ``matrices``, for ``Matrix``) emits nothing else, and the worker refuses anything else before
``parse_expr`` (which calls ``eval``). The worker's comparisons are a registry, ``_RELATIONS``:
expressions equal, equations proportional, matrices the same.
``equal(a, b, timeout)`` takes two ``expr.to_python`` strings and returns True, False, or None when
sympy could not decide in time. Try ``python -m llm_finetuning.grading.symbolic``.
"""

from __future__ import annotations

import atexit
import json
import re
import select
import subprocess
import sys
import threading
import time
from typing import Any

STARTUP_TIMEOUT_S = 60.0  # the most a call waits for a worker still importing sympy (not a verdict bound)
MEMORY_LIMIT_BYTES = 1 << 30  # the worker's address space (about 70 MB in use): a hostile expression fails there
SAFE_NAMES = frozenset({
    "pi", "oo", "E", "I", "sqrt", "root", "factorial", "binomial", "Abs", "sin", "cos", "tan", "sec",
    "csc", "cot", "asin", "acos", "atan", "asec", "acsc", "acot", "sinh", "cosh", "tanh", "log", "exp",
    "Matrix",
})  # fmt: skip
_SAFE = re.compile(r"^[\w\s+\-*/(),.]*$")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

_lock = threading.Lock()
_worker: subprocess.Popen | None = None  # the process answering requests
_spare: subprocess.Popen | None = None  # started alongside, so a killed worker is replaced warm
_ready: set[int] = set()  # pids that have said "ready"


def equal(a: str, b: str, timeout: float = 1.0, relation: str = "equal") -> bool | None:
    """Whether sympy proves the expressions ``a`` and ``b`` equal (``relation="equal"``), the
    equations ``a = 0`` and ``b = 0`` the same (``"proportional"``) or two matrix expressions the
    same matrix (``"matrix"``); None when that is not known within ``timeout`` seconds (counting any
    wait for the lock, not the worker's start)."""
    called = time.monotonic()
    waiting = timeout if _is_ready() else timeout + STARTUP_TIMEOUT_S
    if not _lock.acquire(timeout=waiting):
        return None
    try:
        was_ready = _is_ready()
        worker = _ready_worker(time.monotonic() + STARTUP_TIMEOUT_S)
        if worker is None:
            return None  # sympy did not import within STARTUP_TIMEOUT_S: a broken install, not a verdict
        deadline = (called if was_ready else time.monotonic()) + timeout
        worker.stdin.write(json.dumps([relation, a, b]) + "\n")
        worker.stdin.flush()
        if select.select([worker.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            reply = worker.stdout.readline()
            if reply:
                return json.loads(reply)
        _replace_worker()
        return None
    except (OSError, ValueError):
        _replace_worker()
        return None
    finally:
        _lock.release()


def start(wait: bool = False) -> None:
    """Start the worker if none is running and return at once; with ``wait``, also wait until it is
    ready (at most ``STARTUP_TIMEOUT_S``)."""
    if not wait:
        if _worker is None and _lock.acquire(blocking=False):  # busy lock: a call is using the worker
            try:
                if _worker is None:
                    _replace_worker()
            finally:
                _lock.release()
        return
    with _lock:
        _ready_worker(time.monotonic() + STARTUP_TIMEOUT_S)


def _is_ready() -> bool:
    worker = _worker
    return worker is not None and worker.pid in _ready and worker.poll() is None


def _ready_worker(deadline: float) -> subprocess.Popen | None:
    """The running worker once it has said "ready" (None if it has not by ``deadline``); starts the
    worker if needed."""
    if _worker is None or _worker.poll() is not None:
        _replace_worker()
    if _worker.pid not in _ready:
        if not select.select([_worker.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return None
        if _worker.stdout.readline().strip() != "ready":
            raise OSError("the sympy worker did not start")
        _ready.add(_worker.pid)
    return _worker


def _replace_worker() -> None:
    """Start the first worker; or kill the current one (stuck or dead), promote the spare and start a
    new spare. The spare exists only after a first replacement, so a cold start imports sympy once."""
    global _worker, _spare
    replacing = _worker is not None
    _kill(_worker)
    if _spare is not None and _spare.poll() is not None:
        _kill(_spare)
        _spare = None
    if _spare is not None:
        _worker, _spare = _spare, _start()
    else:
        _worker, _spare = _start(), (_start() if replacing else None)


def _start() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )


def _kill(process: subprocess.Popen | None) -> None:
    if process is not None:
        process.kill()
        process.wait(timeout=5)
        process.stdin.close()
        process.stdout.close()
        _ready.discard(process.pid)


@atexit.register
def shutdown() -> None:
    """Stop the worker (also run at interpreter exit)."""
    global _worker, _spare
    with _lock:
        _kill(_worker)
        _kill(_spare)
        _worker = _spare = None


def started() -> bool:
    """Whether a worker process exists (ready or still starting)."""
    return _worker is not None


def worker_pid() -> int | None:
    """The worker's process id, or None before the worker was first started (for tests)."""
    return _worker.pid if _worker is not None else None


def _serve() -> None:
    """The worker's loop: answer ``[relation, a, b]`` lines until stdin closes."""
    _limit_memory()
    # Import sympy and run each kind of comparison once before saying "ready": sympy loads much of
    # itself lazily, and the first simplify would otherwise cost a real comparison ~0.3 s.
    _compare("equal", "sqrt(8)+v_x", "2*sqrt(2)+v_x")
    _compare("equal", "sin(v_x)**(2)+cos(v_x)**(2)", "1")
    _compare("proportional", "2*v_x+2*v_y-10", "v_x+v_y-5")
    _compare("matrix", "Matrix(2,2,(2,1,1,1))**(-1)*Matrix(2,1,(1,v_x))", "Matrix(2,1,(1-v_x,2*v_x-1))")
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            answer = _compare(*json.loads(line))
        except Exception:  # noqa: BLE001  (unparsable or unsupported: not provably equal)
            answer = False
        print(json.dumps(bool(answer)), flush=True)


def _limit_memory() -> None:
    """Cap the worker's address space, so an expression that would take gigabytes (``10**(10**10)``) fails
    with MemoryError, which answers "not equal", instead of taking the training machine's memory."""
    try:
        import resource
    except ImportError:  # not on this platform (Windows): the time bound still holds
        return
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


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


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        print("sqrt(8) == 2*sqrt(2):", equal("sqrt(8)", "2*sqrt(2)"))
        started = time.perf_counter()
        print("a stuck comparison:", equal("factorial(factorial(20))", "1", timeout=0.5))
        print(f"  returned after {time.perf_counter() - started:.2f} s; next:", equal("1/2", "(2/4)"))
