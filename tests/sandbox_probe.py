"""Sandbox services for the sandbox tests: each evaluates the Python expression it is sent with the real
``eval`` (taken at import, before the worker installs its parsers), as a verifier the parsers did not cover
would. So every case sent to them is code that runs inside a worker, held only by the kernel's layers.

- ``SERVICE`` (this module): each call in a fresh copy of the worker, as third-party verifiers run;
- ``sandbox_probe_inline.SERVICE``: every call in the worker itself, as the grader's sympy runs.
"""

import builtins

from llm_finetuning.sandbox import Service

_EVAL = builtins.eval


def evaluate(expression: str) -> str:
    return repr(_EVAL(expression))  # the point: what a hostile answer would reach


SERVICE = Service(handle=evaluate, headroom_bytes=256 << 20, isolated=lambda request: True)
