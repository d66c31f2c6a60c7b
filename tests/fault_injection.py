"""Runs of ``run_training.py`` with one kill point armed, forked from a process that has imported the libraries.

``python tests/fault_injection.py`` imports the pipeline and its libraries once (about 12 s), then serves
requests on stdin, one JSON line each: ``{"point": POINT, "count": N, "args": [...], "log": PATH}``. For each
it forks a child that arms the kill point, writes its console to ``log`` and runs ``run_training.py`` with
``args``; the child SIGKILLs itself the N-th time it reaches POINT (``none``: no kill point), as a power cut or
the OOM killer would. The reply is the child's exit status, ``-9`` when the kill point was reached. Forking
from an imported parent makes a killed-and-resumed run cost seconds instead of the libraries' import each time.

The points wrap library functions where the pipeline's code finds them (including names bound by
``from x import f``); nothing in the pipeline knows about them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm(owner: Any, name: str, after: bool, count: int, calls: list[int],
         only: Callable[..., bool] = lambda *a, **k: True) -> None:  # fmt: skip
    """Wrap ``owner.name`` so that the ``count``-th qualifying call (counted in ``calls``, which wrappers of one
    kill point share) is the last thing this process does: before the call runs, or just after with ``after``."""
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not only(*args, **kwargs):
            return original(*args, **kwargs)
        calls[0] += 1
        if calls[0] == count and not after:
            _die()
        result = original(*args, **kwargs)
        if calls[0] == count:
            _die()
        return result

    setattr(owner, name, wrapped)


def _cut_metrics_line(count: int) -> None:
    """The ``count``-th metrics record is written half-way, then the process dies: a line cut short."""
    from llm_finetuning.reporting.run_outputs import MetricsWriter

    original, calls = MetricsWriter.write, [0]

    def write(self: Any, phase: str, step: int, values: dict[str, Any]) -> None:
        calls[0] += 1
        if calls[0] == count and self.enabled:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write('{"phase": "' + phase + '", "step": ')
            _die()
        original(self, phase, step, values)

    MetricsWriter.write = write


def _of_phase(kind: str) -> Callable[..., bool]:
    return lambda trainer, *args, **kwargs: kind in type(trainer).__name__


def arm(point: str, count: int) -> None:
    """Arm the kill point ``point`` for its ``count``-th occurrence."""
    import peft.peft_model
    import safetensors.torch
    import torch
    import transformers.modeling_utils
    from transformers import Trainer

    from llm_finetuning.evaluation.evaluator import Evaluator
    from llm_finetuning.model.manager import ModelManager

    calls = [0]
    if point in ("sft_step", "grpo_step"):
        _arm(Trainer, "training_step", True, count, calls, only=_of_phase(point.split("_")[0].upper()))
    elif point == "torch_save":  # optimizer, scheduler and RNG states of a checkpoint
        _arm(torch, "save", False, count, calls)
    elif point == "weights_write":  # model and adapter weights: checkpoints and saves
        for owner, name in ((safetensors.torch, "save_file"), (peft.peft_model, "safe_save_file"),
                            (transformers.modeling_utils, "safe_save_file")):  # fmt: skip
            _arm(owner, name, False, count, calls)
    elif point == "rename":  # just after a rename: between the two renames of a save's swap, or a JSON write's
        _arm(os, "replace", True, count, calls)
    elif point == "fsync":  # a small file flushed but not yet renamed into place
        _arm(os, "fsync", False, count, calls)
    elif point == "metrics_line":
        _cut_metrics_line(count)
    elif point == "evaluation":
        _arm(Evaluator, "evaluate", False, count, calls)
    elif point == "adapter_save":
        _arm(ModelManager, "save_adapter", False, count, calls)
    elif point != "none":
        raise SystemExit(f"unknown kill point {point!r}")


def _child(request: dict[str, Any]) -> None:
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    status = 1
    try:
        arm(request["point"], request["count"])
        from llm_finetuning.tools.train import main

        sys.argv = [str(ROOT / "run_training.py"), *request["args"]]
        status = main(request["args"])
    except BaseException:  # noqa: BLE001 - a traceback is what the test looks for in the log
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def serve() -> None:
    import datasets  # noqa: F401 - every library the pipeline imports, once, before the first fork
    import peft  # noqa: F401
    import transformers  # noqa: F401
    import trl  # noqa: F401

    import llm_finetuning.pipeline
    import llm_finetuning.tools.train  # noqa: F401
    from llm_finetuning.training import grpo, sft  # noqa: F401

    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        child = os.fork()
        if child == 0:
            _child(request)
        _, status = os.waitpid(child, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"status": code}), flush=True)


if __name__ == "__main__":
    serve()
