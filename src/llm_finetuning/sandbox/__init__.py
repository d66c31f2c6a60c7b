"""Code that must not be trusted runs here: in a worker process it can kill, with limits it cannot lift.

Two kinds of work run on text a model wrote: sympy, which can compute for minutes on an innocent-looking
expression, and verifiers that are not ours (reasoning-gym's ``score_answer``, which ``eval``\\ s the answer
in several tasks, or calls sympy's ``parse_expr``), which can execute what the model wrote. Both run in a
``Worker``: a persistent child process, started once (its imports paid once, in the background), that
answers requests over a pipe; a call that overruns its deadline kills the child and a warm spare takes its
place. The child confines itself before it says it is ready (``confine.py``): an address-space limit, a
CPU-time limit per call, no file writes, no processes, no sockets, no foreign functions, and it dies with
its parent.

- ``worker.Worker``: the parent's side (start, call with a deadline, kill and replace, shut down);
- ``serve``: the child's side, ``python -m llm_finetuning.sandbox.serve <module>`` serving the module's
  ``SERVICE``;
- ``confine``: the limits a child puts on itself;
- ``verifiers.call``: any ``module:function`` (a task verifier, a plug-in reward) run in the verifier worker.
"""

from .worker import Outcome, Service, Worker

__all__ = ["Outcome", "Service", "Worker"]
