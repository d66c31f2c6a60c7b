"""Your own reward: a function named by import path (``my_package.rewards:brevity``) or by file
(``./my_rewards.py:brevity``), with a weight and params like the built-in ones.

The function has TRL's reward signature: ``f(completions, **kwargs) -> list[float | None]`` (one score per
completion, ``None`` where it does not apply), and receives what TRL gives every reward — ``prompts``,
``completions`` (strings or chat messages), ``completion_ids`` is left out (token ids do not travel), and every
dataset column (``answer``, ``reasoning_gym_entry``, …) — plus the reward's ``params`` as keyword arguments. It
is checked when the config is built: the module imports, the name is a callable, it takes ``completions`` and
each param (or ``**kwargs``). In training and evaluation alike it runs under the rules every reward follows:

- in a **sandboxed worker process** (``sandbox: true``, the default; ``sandbox/``): no file writes, processes or
  sockets, memory and CPU limits, ``timeout`` seconds per call, killed and replaced when it overruns. A reward
  that needs to write files or run a program (a code-execution reward) sets ``sandbox: false`` and then runs in
  the trainer, unbounded;
- it **never raises into training**: a call that raises, overruns, or returns something that is not one number
  (or None) per completion gives ``None`` for the batch (the reward does not apply: no advantage from it), logged
  once with the reason.

Python programs can pass a callable instead of a name (``rewards.build_rewards`` accepts ``{"name": fn}``); it runs
in the trainer, wrapped the same way.

    rewards:
      rewards:
        - {name: "./my_rewards.py:brevity", weight: 0.5, params: {target_words: 40}}
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import logging
import math
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sandbox import Service, Worker, parsers
from .base import RewardParamError

__all__ = ["PluginReward", "is_plugin_name", "load_target"]

logger = logging.getLogger(__name__)

LOAD_TIMEOUT_S = 120.0  # importing the user's module in the worker: their imports, not a completion's time
_LOGGED: set[tuple[str, str]] = set()


def is_plugin_name(name: Any) -> bool:
    """Whether a reward name points at a function of the user's (``module:function`` or ``file.py:function``)."""
    return isinstance(name, str) and ":" in name


def load_target(target: str) -> Callable[..., Any]:
    """The function ``target`` names: ``package.module:function`` or ``path/to/file.py:function``."""
    where, _, attribute = target.rpartition(":")
    if not where or not attribute:
        raise RewardParamError(f"{target}: name a function as module:function or file.py:function")
    try:
        module = _import_file(where) if where.endswith(".py") else importlib.import_module(where)
    except Exception as exc:  # noqa: BLE001 - any import error is the user's to fix, in one line
        raise RewardParamError(f"{target}: cannot import {where} ({type(exc).__name__}: {exc})") from None
    function = module
    for part in attribute.split("."):
        function = getattr(function, part, None)
    if not callable(function):
        raise RewardParamError(f"{target}: {where} has no callable {attribute}")
    return function


@functools.lru_cache(maxsize=64)
def _import_file(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no file {file}")
    name = f"llm_finetuning_reward_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_signature(target: str, function: Callable[..., Any], params: Mapping[str, Any]) -> None:
    """TRL's calling convention: ``completions`` and each param by keyword, or ``**kwargs``."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # a builtin or C function: its call will tell
    names = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in names.values())
    missing = [name for name in ("completions", *params) if name not in names and not takes_any]
    if missing:
        raise RewardParamError(f"{target}: the function takes no {', '.join(missing)}; a reward is called as "
                               "f(prompts=..., completions=..., **dataset_columns, **params) (add **kwargs)")  # fmt: skip


@dataclass
class PluginReward:
    """A reward function of the user's, called as TRL calls rewards, safely (module docstring)."""

    target: str
    params: dict[str, Any] = field(default_factory=dict)
    sandbox: bool = True
    timeout: float = 10.0
    function: Callable[..., Any] | None = None  # a callable given directly (Python API): runs in the trainer

    needs_answer = False
    uses_grader = False

    def __post_init__(self) -> None:
        if self.function is None:
            self.target = _absolute(self.target)
            function = load_target(self.target)  # in this process too: the config is checked before any model
        else:
            function = self.function
            self.sandbox = False
        check_signature(self.target, function, self.params)
        if not (isinstance(self.timeout, (int, float)) and math.isfinite(self.timeout) and self.timeout > 0):
            raise RewardParamError(f"{self.target}: timeout must be a positive number of seconds")

    @property
    def __name__(self) -> str:  # TRL names the reward's metrics after this
        return self.target.rpartition(":")[2] if self.function is None else getattr(self.function, "__name__", "reward")

    def start(self) -> None:
        if self.sandbox:
            _WORKER.start()

    def bounds(self) -> tuple[float, float]:
        return -math.inf, math.inf

    def __call__(self, prompts: Any = None, completions: Any = None, completion_ids: Any = None,
                 **kwargs: Any) -> list[float | None]:  # fmt: skip
        completions = list(completions or [])
        arguments = {"prompts": list(prompts) if prompts is not None else None, "completions": completions,
                     **{key: _plain(value) for key, value in kwargs.items()}, **self.params}  # fmt: skip
        if self.sandbox:
            scores, failure = _call_in_worker(self.target, arguments, self.timeout)
        else:
            scores, failure = _call_here(self.function or load_target(self.target), arguments)
        checked, problem = _checked(scores, len(completions)) if failure is None else (None, failure)
        if checked is None:
            _log_once(self.target, problem)
            return [None] * len(completions)
        return checked


def _absolute(target: str) -> str:
    where, _, attribute = target.rpartition(":")
    return f"{Path(where).resolve()}:{attribute}" if where.endswith(".py") else target


def _plain(value: Any) -> Any:
    """A dataset column as JSON-ready values (a worker receives JSON)."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def _call_here(function: Callable[..., Any], arguments: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        return function(**arguments), None
    except Exception as exc:  # noqa: BLE001 - a reward must never stop training
        return None, f"raised {type(exc).__name__}: {str(exc)[:200]}"


def _checked(scores: Any, count: int) -> tuple[list[float | None] | None, str]:
    if not isinstance(scores, (list, tuple)) or len(scores) != count:
        return None, f"returned {type(scores).__name__} instead of {count} scores, one per completion"
    checked: list[float | None] = []
    for score in scores:
        if score is None:
            checked.append(None)
        elif isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
            checked.append(float(score))
        else:
            return None, f"returned {score!r}, not a finite number or None"
    return checked, ""


def _log_once(target: str, problem: str) -> None:
    kind = problem.split(":")[0]
    if (target, kind) not in _LOGGED:
        _LOGGED.add((target, kind))
        logger.warning("reward %s %s; the batch gets no score from it (None)", target, problem)


def _serve(request: list[Any]) -> Any:
    """In the worker: ``["load", target]`` imports the function; ``["call", target, arguments]`` calls it."""
    if request[0] == "load":
        before = set(sys.modules)
        function = load_target(request[1])
        parsers.reads_model_text(function.__module__, *_users_modules(set(sys.modules) - before))
        return None
    return load_target(request[1])(**request[2])


def _users_modules(names: set[str]) -> list[str]:
    """Of modules a load imported, the user's own: those outside the Python installation and its packages."""
    installed = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    own = []
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None) or ""
        if file and not any(file.startswith(root) for root in installed):
            own.append(name)
    return own


def _calls(request: list[Any]) -> bool:
    """A call runs the user's function on model text: in a fresh copy of the worker. Loading is the user's import."""
    return request[0] == "call"


SERVICE = Service(handle=_serve, isolated=_calls)
_WORKER = Worker(__name__)
_loaded: set[tuple[int | None, str]] = set()  # (worker pid, target) imported there


def _call_in_worker(target: str, arguments: dict[str, Any], timeout: float) -> tuple[Any, str | None]:
    if (_WORKER.pid, target) not in _loaded:  # the user's imports are not a completion's time
        loaded = _WORKER.call(["load", target], LOAD_TIMEOUT_S)
        if not loaded.ok:
            return None, loaded.failure
        _loaded.add((_WORKER.pid, target))
    outcome = _WORKER.call(["call", target, arguments], timeout)
    return (outcome.value, None) if outcome.ok else (None, outcome.failure)
