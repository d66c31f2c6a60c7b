"""A worker: ``python -m llm_finetuning.sandbox.serve <module> <parent pid>`` serves ``<module>.SERVICE``.

It ties its life to the parent's, warms the service up (imports, first calls), confines itself
(``confine.lock_down``), says it is ready (with the layers in force), then answers one JSON request per line
until its input closes. The protocol runs on private copies of the pipes: file descriptors 0 and 1 are pointed
at ``/dev/null`` before any request, so a ``print`` or ``input`` in the code it runs cannot reach the parent.

Each request carries a token the parent drew for it (128 random bits) and the call's time limit; the reply
carries the token back, and a parent that reads anything else kills the worker (``worker.py``).

A request the service marks ``isolated`` (a third-party verifier or a user's reward on model text) runs in a
fresh copy of the worker: ``fork``, then in the copy, before it reads the request's text, only a new pipe left
open, death with the worker, the call's CPU limit, the call's seccomp filter (no thread, no process, no signal),
the parsers; it writes one reply on its own pipe, closes it and exits. The worker reads that pipe to its end
(or to the deadline), kills the copy, and accepts exactly one well-formed reply, else it answers ``unexpected
output``. So code that somehow runs inside a call decides at most that call's reply: it cannot reach the
worker's pipe to the parent, another call, or anything after its call (docs/guarantees.md).

Why a module run with ``-m`` rather than ``multiprocessing``: a spawn or forkserver child re-imports the
caller's ``__main__``, so a training script without an ``if __name__ == "__main__"`` guard would run again
inside the worker.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import sys
import time
import traceback
from typing import Any

from . import parsers
from .confine import CallConfinement, die_with_parent, lock_down

REPLY_LIMIT_BYTES = 1 << 20  # a call's reply is a score or a short error: more is not a reply


def main(module_name: str, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer, which stops after its step
    requests, replies = _private_pipes()
    service = importlib.import_module(module_name).SERVICE
    service.warm_up()
    forks = service.isolated is not None
    layers = lock_down(service.headroom_bytes, forks=forks)
    _send(replies, {"ready": os.getpid(), "layers": layers, "forks": forks})
    calls = _Calls(service.handle, layers) if forks else None
    for line in requests:
        token, timeout, request = json.loads(line)
        if calls is not None and service.isolated(request):
            reply = calls.run(request, timeout)
        else:
            reply = _answer(service.handle, request)
            if calls is not None:
                calls.refresh()  # the worker's state changed (an import, a cache): the next copy has it
        _send(replies, {"t": token, **reply})


def _answer(handle: Any, request: Any) -> dict[str, Any]:
    try:
        return {"value": handle(request)}
    except BaseException as exc:  # noqa: BLE001 - whatever the code does, the parent gets an answer
        return {"error": _describe(exc)}


class _Calls:
    """Runs isolated requests, each in a fresh copy of this worker."""

    def __init__(self, handle: Any, layers: dict[str, str]) -> None:
        self.handle, self.layers, self.modules_seen = handle, layers, -1
        self.refresh()

    def refresh(self) -> None:
        """Prepare the copies' confinement again when modules were imported since (a reward's module, a task's
        lazy import): where sympy's ``parse_expr`` lives may have changed."""
        if len(sys.modules) != self.modules_seen:
            self.modules_seen = len(sys.modules)
            self.confinement = CallConfinement(parsers.replacements(), self.layers)
        gc.freeze()  # a copy's collections then leave the worker's objects (and their pages) alone

    def run(self, request: Any, timeout: float) -> dict[str, Any]:
        _reap()
        read_end, write_end = os.pipe()
        worker = os.getpid()
        pid = os.fork()
        if pid == 0:
            self._in_copy(request, timeout, write_end, worker)
        os.close(write_end)
        try:
            output, finished = _read_to_end(read_end, time.monotonic() + timeout)
        finally:
            os.close(read_end)
            os.kill(pid, signal.SIGKILL)  # reaped by a later call: its teardown is not this call's time
        if not finished:
            return {"failure": "timeout"}
        return _one_reply(output) if output is not None else {"failure": "unexpected output"}

    def _in_copy(self, request: Any, timeout: float, write_end: int, worker: int) -> None:
        """The copy: confine, answer, write once, exit. Never returns."""
        try:
            self.confinement.enter(timeout_s=timeout, keep_fd=write_end, parent_pid=worker)
            data = _encode(_answer(self.handle, request))
            while data:
                data = data[os.write(write_end, data) :]
            os.close(write_end)
        finally:
            os._exit(0)


def _encode(reply: dict[str, Any]) -> bytes:
    try:
        return json.dumps(reply).encode("utf-8")
    except (TypeError, ValueError) as exc:  # a value JSON cannot carry
        return json.dumps({"error": _describe(exc)}).encode("utf-8")


def _read_to_end(fd: int, deadline: float) -> tuple[bytes | None, bool]:
    """All a copy writes until its pipe closes (True), or nothing by the deadline (False); None for more than
    ``REPLY_LIMIT_BYTES``."""
    chunks, size = [], 0
    while select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
        if size > REPLY_LIMIT_BYTES:
            return None, True
    return b"", False


def _one_reply(output: bytes) -> dict[str, Any]:
    """The copy's reply: one JSON object holding a value or an error, nothing else; an empty output means the
    copy died first (a limit, a signal)."""
    if not output:
        return {"failure": "crashed"}
    try:
        reply = json.loads(output)
    except ValueError:
        return {"failure": "unexpected output"}
    if not isinstance(reply, dict) or len(reply) != 1 or not ({"value", "error"} & reply.keys()):
        return {"failure": "unexpected output"}
    if "error" in reply and not isinstance(reply["error"], str):
        return {"failure": "unexpected output"}
    return reply


def _reap() -> None:
    """Collect the copies killed by earlier calls."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _private_pipes():
    """The request and reply pipes on new descriptors; 0 and 1 on /dev/null."""
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return requests, replies


def _send(replies: Any, message: dict[str, Any]) -> None:
    replies.write(json.dumps(message) + "\n")
    replies.flush()


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {str(exc)[:200]}{where}"


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
