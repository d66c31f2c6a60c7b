"""A worker child: ``python -m llm_finetuning.sandbox.serve <module> <parent pid>`` serves ``<module>.SERVICE``.

It ties its life to the parent's, warms the service up (imports, first calls), confines itself
(``confine.lock_down``), then answers one JSON request per line until its input closes. The protocol runs
on private copies of the pipes: file descriptors 0 and 1 are pointed at ``/dev/null`` before any request,
so a ``print`` or ``input`` in the code it runs cannot reach the parent, and every reply carries the
request's number, so the parent takes no stray line for an answer.

Why a module run with ``-m`` rather than ``multiprocessing``: a spawn or forkserver child re-imports the
caller's ``__main__``, so a training script without an ``if __name__ == "__main__"`` guard would run again
inside the worker.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import traceback

from .confine import die_with_parent, lock_down


def main(module_name: str, parent_pid: int) -> None:
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer, which stops after its step
    requests, replies = _private_pipes()
    service = importlib.import_module(module_name).SERVICE
    service.warm_up()
    lock_down(service.headroom_bytes)
    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in requests:
        number, request = json.loads(line)
        try:
            reply = json.dumps({"n": number, "value": service.handle(request)})
        except BaseException as exc:  # noqa: BLE001 - whatever the code does, the parent gets an answer
            reply = json.dumps({"n": number, "error": _describe(exc)})
        replies.write(reply + "\n")
        replies.flush()


def _private_pipes():
    """The request and reply pipes on new descriptors; 0 and 1 on /dev/null."""
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return requests, replies


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {str(exc)[:200]}{where}"


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
