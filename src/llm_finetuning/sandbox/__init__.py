"""Code that must not be trusted runs here: in a worker process the kernel confines, on text parsed, never run.

Two kinds of work run on text a model wrote: sympy, which can compute for minutes on an innocent-looking
expression, and code that is not ours (reasoning-gym's verifiers, math-verify, a user's reward), which may
``eval`` what the model wrote. Both run in a ``Worker``: a persistent child process, started once (its imports
paid once, in the background), that answers requests over a pipe. Once its imports are done it confines itself
(``confine.py``: limits, Landlock, a seccomp filter); a request its service marks ``isolated`` runs in a fresh
fork of it that confines itself further and puts parsers where the code would evaluate (``serve.py``). What each
layer stops and cannot stop: docs/guarantees.md.

- ``worker``: the parent's side (start, call with a deadline and a token, kill and replace, shut down);
- ``serve``: the worker's side, ``python -m llm_finetuning.sandbox.serve <module> <parent pid>`` serving the
  module's ``SERVICE``, a fresh copy per isolated request;
- ``confine``: the confinement, the worker's and a call's, in order;
- ``seccomp`` / ``landlock``: the kernel's layers; ``parsers``: ``eval``, ``exec`` and ``parse_expr`` made safe.
"""

from .worker import Outcome, Service, Worker

__all__ = ["Outcome", "Service", "Worker"]
