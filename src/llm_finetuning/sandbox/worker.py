"""The parent's side of a worker process: start it, call it with a deadline, kill and replace it, end it.

``Worker(module)`` runs ``python -m llm_finetuning.sandbox.serve <module>``, which serves the module's
``SERVICE`` (a ``Service``: what to do with a request, what to warm up, how much memory it may add). The
child starts in the background on ``start()`` or on the first call, and is reused for every call after:
its imports are paid once. ``call(request, timeout)`` returns an ``Outcome``: the reply, or why there is
none. A call that overruns its deadline kills the child and a spare, started after the first
replacement, takes over warm, so one stuck request does not slow the next.

No outcome depends on how long the child took to start: a call that finds it still starting waits for it
(up to ``startup_timeout_s``), and its deadline counts from the moment the child is ready. Before each call
the parent sets the child's CPU-time limit to the deadline (``RLIMIT_CPU``; the child cannot change it), so
a computation the wall clock would not catch in time, because the machine is loaded, is stopped by the
kernel all the same. A lock serialises calls, so a worker is safe to share between threads; the process
handles live on the ``Worker`` only, and a module-level ``Worker`` keeps what uses it picklable.

Each request carries a token of 128 random bits the child echoes in its reply; a reply with another token, or
a line that does not parse, is not taken for an answer: the child is killed and replaced and the call fails
with ``unexpected output``. A service whose calls each run in a fresh copy of the child (``Service.isolated``)
has its copies killed at the call's deadline by the child itself, which stays; the parent's own deadline is
then ``ISOLATION_GRACE_S`` later and only catches a child that stopped answering.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import secrets
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "Service", "Worker"]

logger = logging.getLogger(__name__)

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding llm_finetuning/
_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
ISOLATION_GRACE_S = 2.0  # a fresh copy's fork, reply and kill, past the call's own deadline


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Service:
    """What a worker child serves: ``handle(request) -> reply`` (both JSON), ``warm_up()`` before the
    child confines itself, the memory it may allocate past its imports, and ``isolated(request)``: whether
    the request runs third-party code on model text, and so in a fresh copy of the child (``serve.py``).
    Without ``isolated`` the child answers every request itself (our own code, which evaluates no text)."""

    handle: Callable[[Any], Any]
    warm_up: Callable[[], None] = _nothing
    headroom_bytes: int = 1 << 30
    isolated: Callable[[Any], bool] | None = None


@dataclass(frozen=True)
class Outcome:
    """A call's reply (``value``), or why there is none (``failure``: ``timeout``, ``crashed``, ``not
    started``, ``unexpected output``, or ``raised <what>``)."""

    value: Any = None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class Worker:
    """One persistent, killable worker process serving ``module``'s ``SERVICE``."""

    def __init__(self, module: str, startup_timeout_s: float = 60.0) -> None:
        self.module, self.startup_timeout_s = module, startup_timeout_s
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None  # the child answering calls
        self._spare: subprocess.Popen | None = None  # started alongside after a first replacement
        self._ready: set[int] = set()  # pids that have said they are ready
        self.layers: dict[str, str] = {}  # the confinement the child reported (confine.lock_down)
        self._grace_s = 0.0  # ISOLATION_GRACE_S once a child says it forks per call
        atexit.register(self.shutdown)

    @property
    def pid(self) -> int | None:
        """The answering child's process id; None before the first start."""
        return self._process.pid if self._process is not None else None

    def started(self) -> bool:
        """Whether a child exists (ready or still starting)."""
        return self._process is not None

    def ready(self) -> bool:
        process = self._process
        return process is not None and process.pid in self._ready and process.poll() is None

    def start(self, wait: bool = False) -> None:
        """Start the child if none runs, and return at once; with ``wait``, until it is ready."""
        if not wait:
            if self._process is None and self._lock.acquire(blocking=False):  # busy: a call is starting it
                try:
                    if self._process is None:
                        self._replace()
                finally:
                    self._lock.release()
            return
        with self._lock:
            self._ready_process(time.monotonic() + self.startup_timeout_s)

    def call(self, request: Any, timeout: float) -> Outcome:
        """``request`` answered within ``timeout`` seconds (counting any wait for another thread's call,
        not the child's start)."""
        called = time.monotonic()
        waiting = timeout if self.ready() else timeout + self.startup_timeout_s
        if not self._lock.acquire(timeout=max(0.0, waiting)):
            return Outcome(failure="timeout")
        try:
            for _ in range(2):  # a worker found dead before the request reached it is replaced, once
                was_ready = self.ready()
                process = self._ready_process(time.monotonic() + self.startup_timeout_s)
                if process is None:
                    return Outcome(failure="not started")
                deadline = (called if was_ready else time.monotonic()) + timeout
                _limit_cpu(process.pid, max(0.0, deadline + self._grace_s - time.monotonic()))
                token = secrets.token_hex(16)
                try:
                    line = json.dumps([token, max(0.0, deadline - time.monotonic()), request])
                    process.stdin.write(line + "\n")
                    process.stdin.flush()
                except (OSError, ValueError):  # a broken or closed pipe: it died between calls
                    self._replace()
                    continue
                return self._reply(process, token, deadline + self._grace_s)
            return Outcome(failure="crashed")
        finally:
            self._lock.release()

    def shutdown(self) -> None:
        """Stop the child and the spare (also run at interpreter exit)."""
        with self._lock:
            for process in (self._process, self._spare):
                self._kill(process)
            self._process = self._spare = None

    def _reply(self, process: subprocess.Popen, token: str, deadline: float) -> Outcome:
        if not select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            self._replace()
            return Outcome(failure="timeout")
        line = process.stdout.readline()
        if not line:  # the child died: a limit it hit (CPU time, memory) or a kill
            self._replace()
            return Outcome(failure="crashed")
        reply = _parse(line)
        if reply is None or reply.get("t") != token:  # not the answer to this call: nothing it says is trusted
            self._replace()
            return Outcome(failure="unexpected output")
        if "error" in reply:
            return Outcome(failure=f"raised {reply['error']}")
        if "failure" in reply:  # a fresh copy overran, died, or wrote something that is not a reply
            return Outcome(failure=str(reply["failure"]))
        return Outcome(value=reply.get("value"))

    def _ready_process(self, deadline: float) -> subprocess.Popen | None:
        """The child once it has said it is ready (None if it has not by ``deadline``); starts one if needed."""
        if self._process is None or self._process.poll() is not None or self._process.stdin.closed:
            self._replace()
        process = self._process
        if process.pid not in self._ready:
            if not select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return None
            ready = _parse(process.stdout.readline())
            if ready is None or ready.get("ready") != process.pid:
                raise OSError(f"the {self.module} worker did not start")
            self.layers = dict(ready.get("layers") or {})
            self._grace_s = ISOLATION_GRACE_S if ready.get("forks") else 0.0
            _say_refused_layers(self.module, self.layers)
            self._ready.add(process.pid)
        return process

    def _replace(self) -> None:
        """Start the first child; or kill the current one (stuck or dead), promote the spare and start a new
        spare. The spare exists only after a first replacement, so a cold start pays the imports once."""
        replacing = self._process is not None
        self._kill(self._process)
        if self._spare is not None and self._spare.poll() is not None:
            self._kill(self._spare)
            self._spare = None
        if self._spare is not None:
            self._process, self._spare = self._spare, self._launch()
        else:
            self._process, self._spare = self._launch(), (self._launch() if replacing else None)

    def _launch(self) -> subprocess.Popen:
        path = os.environ.get("PYTHONPATH")
        env = {
            **os.environ,
            **_ONE_THREAD,
            "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, path])),
        }
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "llm_finetuning.sandbox.serve", self.module, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            cwd="/",
            env=env,
            start_new_session=True,  # no controlling terminal to push keystrokes into
        )

    def _kill(self, process: subprocess.Popen | None) -> None:
        if process is None:
            return
        process.kill()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # stuck in the kernel: the kill still stands, and the pipes go
            pass
        for pipe in (process.stdin, process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        self._ready.discard(process.pid)


_SAID: set[str] = set()


def _say_refused_layers(module: str, layers: dict[str, str]) -> None:
    """Once per process: a layer the kernel offers but refused to install (one it does not offer at all the run's
    plan says at start-up)."""
    for name, state in layers.items():
        if "could not install" in state and name not in _SAID:
            _SAID.add(name)
            logger.warning("sandbox: the %s worker runs without %s, %s", module, name, state.removeprefix("unavailable: "))


def _parse(line: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _limit_cpu(pid: int, seconds: float) -> None:
    """Let the child ``pid`` use ``seconds`` more CPU time (rounded up, plus one: the limit counts whole
    seconds); past it the kernel kills the child with SIGXCPU."""
    try:
        import resource

        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
        hard = resource.prlimit(pid, resource.RLIMIT_CPU)[1]
        soft = math.ceil(used + seconds) + 1
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.prlimit(pid, resource.RLIMIT_CPU, (soft, hard))
    except (
        ImportError,
        OSError,
        ValueError,
        AttributeError,
    ):  # not Linux: the wall-clock deadline still holds
        return
