"""reasoning-gym's procedural tasks: the one place the project touches the package.

reasoning-gym (the optional extra, ``uv sync --extra reasoning-gym``) generates problems for about 100 task
families (``reasoning_gym.factory.DATASETS``) and verifies an answer with each task's own ``score_answer``.
``tasks/gym_rows.py`` makes problems from it (``reasoning_gym:<task>``) and the
``reasoning_gym`` reward scores answers with it; both come through here:

- ``package_problem()``: why the package cannot be used (not installed), with the fix; cheap, imports nothing;
- ``check_task(task, settings, where)``: an unknown task names the closest valid one, a task the allow-list
  refuses (``gym_safety.py``) says why, an unknown or refused setting names the setting; builds the task's
  config only, generates nothing;
- ``task_dataset(task, settings, seed, size)``: the task's dataset object (entries are made on demand);
- ``entry_ref(...)`` / ``verify(ref, answer, timeout)``: where an entry comes from, as the JSON a dataset
  column carries (``ENTRY_COLUMN``), and the task's verifier on an answer to it; ``score_completion`` finds
  the answer in a completion's answer slot first (what the ``reasoning_gym`` reward and evaluation's verdict
  on a reasoning-gym row use: ``tasks/judging.py``). The entry is rebuilt from its reference (the
  dataset object is cached per task, settings, seed and size), not stored: a JSON round trip turns the tuples
  some verifiers compare (arc_agi, rearc) into lists, and a right answer would then score 0.05 instead of 1.

The verifier runs on what a model wrote, and several tasks ``eval`` it (spiral_matrix, binary_matrix,
string_insertion, n_queens) or hand it to sympy's ``parse_expr`` (countdown, puzzle24, the integration
tasks, polynomial_multiplication): ``verify`` therefore runs it in a sandboxed worker process (``sandbox/``),
started once per process by ``start_verifier`` and reused, never in the trainer. The worker builds entries
itself and scores each answer in a fresh copy of itself, where ``eval`` and ``parse_expr`` only parse
(``sandbox/parsers.py``) and the kernel refuses processes, sockets and writes.

Importing reasoning-gym takes about 3 s (it imports sympy and matplotlib), so it is imported on first use,
only when a config names a task or builds the reward.

    >>> task_of("reasoning_gym:chain_sum"), task_of("synthetic:arithmetic")
    ('chain_sum', None)
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib.util
import json
import logging
import math
import threading
import warnings
from collections.abc import Mapping
from typing import Any

from ..config.data import GYM_PREFIX as PREFIX
from ..config.data import gym_task as task_of
from ..grading.extract import answer_slot
from ..sandbox import Outcome, Service, Worker, parsers
from ..schema import ConfigError, closest
from .gym_safety import refusal

__all__ = [
    "ENTRY_COLUMN",
    "EXTRA_FIX",
    "PREFIX",
    "VERIFY_TIMEOUT_S",
    "check_task",
    "entry_ref",
    "package_problem",
    "score_completion",
    "start_verifier",
    "task_dataset",
    "task_of",
    "verify",
]

logger = logging.getLogger(__name__)

EXTRA_FIX = "uv sync --extra reasoning-gym"
ENTRY_COLUMN = "reasoning_gym_entry"  # the dataset column that holds a row's entry reference
VERIFY_TIMEOUT_S = 5.0  # seconds of the verifier's time per answer; past it the answer scores 0
_SET_BY_US = ("seed", "size")  # every task's config has them; data.reasoning_gym sets them


def package_problem() -> str | None:
    """Why reasoning-gym cannot be used here, naming the fix; ``None`` when it is installed."""
    if importlib.util.find_spec("reasoning_gym") is None:
        return f"needs the reasoning-gym package; install it with {EXTRA_FIX}"
    return None


def _registry() -> dict[str, tuple[type, type]]:
    """reasoning-gym's task registry: name -> (dataset class, config class)."""
    problem = package_problem()
    if problem:
        raise ConfigError(f"reasoning-gym {problem}")
    try:
        with warnings.catch_warnings():  # cellpylib, which it imports, compiles with SyntaxWarnings: noise to a user
            warnings.simplefilter("ignore", SyntaxWarning)
            from reasoning_gym.factory import DATASETS
    except ImportError as exc:  # installed but broken (a dependency missing)
        raise ConfigError(f"reasoning-gym does not import ({exc}); reinstall it with {EXTRA_FIX}") from None
    return DATASETS


def check_task(task: str, settings: Mapping[str, Any], where: str) -> None:
    """Refuse an unknown task or settings its config rejects, as a one-line ``ConfigError`` at ``where``."""
    datasets = _registry()
    if task not in datasets:
        match = closest(task, datasets)
        hint = f"did you mean {match}?" if match else f"valid tasks: {', '.join(sorted(datasets))}"
        raise ConfigError(f"{where}: unknown reasoning-gym task {task!r}; {hint}")
    if problem := refusal(task):
        raise ConfigError(f"{where}: {problem}")
    _task_config(task, settings, where, seed=0, size=1)


def _task_config(task: str, settings: Mapping[str, Any], where: str, seed: int, size: int) -> Any:
    config_cls = _registry()[task][1]
    valid = [f.name for f in dataclasses.fields(config_cls) if f.name not in _SET_BY_US]
    for key in settings:
        if key in _SET_BY_US:
            raise ConfigError(f"{where}.{key}: set data.reasoning_gym.seed / num_train instead")
        if key not in valid:
            match = closest(str(key), valid)
            hint = f"did you mean {match}?" if match else f"valid settings: {', '.join(valid) or '(none)'}"
            raise ConfigError(f"{where}.{key}: unknown setting of {task}; {hint}")
    try:
        config = config_cls(**settings, seed=seed, size=size)
        if hasattr(config, "validate"):
            config.validate()
    except (AssertionError, ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{where}: {task} refuses these settings ({reason})") from None
    return config


def task_dataset(task: str, settings: Mapping[str, Any], seed: int, size: int) -> Any:
    """The task's dataset: ``dataset[i]`` is entry ``i`` (``question``, ``answer``, ``metadata``)."""
    check_task(task, settings, PREFIX + task)
    dataset_cls = _registry()[task][0]
    return dataset_cls(config=_task_config(task, settings, PREFIX + task, seed=seed, size=size))


def entry_ref(task: str, settings: Mapping[str, Any], seed: int, size: int, index: int) -> str:
    """Where an entry comes from, as JSON: ``score`` rebuilds the entry from it."""
    fields = {"task": task, "settings": dict(settings), "seed": seed, "size": size, "index": index}
    return json.dumps(fields, sort_keys=True)


@functools.lru_cache(maxsize=16)
def _cached_dataset(task: str, settings: str, seed: int, size: int) -> Any:
    return task_dataset(task, json.loads(settings), seed, size)


@functools.lru_cache(maxsize=4096)
def _entry(ref: str) -> tuple[Any, dict[str, Any]]:
    """The dataset and the entry ``ref`` names (a GRPO group scores one entry several times: built once)."""
    fields = json.loads(ref)
    settings = json.dumps(fields["settings"], sort_keys=True)
    dataset = _cached_dataset(fields["task"], settings, fields["seed"], fields["size"])
    return dataset, dataset[fields["index"]]


def _serve(request: list[str]) -> float | None:
    """In the worker: ``["entry", ref]`` builds the entry (cached); ``["score", ref, answer]`` is the task's
    own verifier (``score_answer``, 0 to 1) on the answer to it."""
    dataset, entry = _entry(request[1])
    return float(dataset.score_answer(request[2], entry)) if request[0] == "score" else None


def _warm_up() -> None:
    """In the worker, before it confines itself: import reasoning-gym; its modules read model text."""
    _registry()
    parsers.reads_model_text("reasoning_gym")


def _scores(request: list[str]) -> bool:
    """A score runs the task's code on the answer: in a fresh copy of the worker. An entry is ours to build."""
    return request[0] == "score"


# the worker imports reasoning-gym once, before it confines itself
SERVICE = Service(handle=_serve, warm_up=_warm_up, isolated=_scores)
_VERIFIER = Worker(__name__)
ENTRY_TIMEOUT_S = 60.0  # building an entry is our work, not the answer's: a bound for a broken task only
_built: set[tuple[int | None, str]] = set()  # (worker pid, entry reference) the worker has built


def start_verifier() -> None:
    """Start the verifier's worker in the background (reasoning-gym imports there in about 3 s); returns at once."""
    _VERIFIER.start()


def verify(ref: str, answer: str, timeout: float) -> Outcome:
    """The task's verifier on ``answer`` to the entry ``ref`` names, in the sandboxed worker: its score, or
    why there is none (it raised, overran ``timeout`` seconds, or hit a limit). The entry is built first,
    outside the answer's ``timeout`` (a task that reads data files takes a while the first time), so the
    verdict does not depend on what the worker had cached. A task the allow-list refuses
    (``gym_safety.refusal``) is not verified: the outcome says why."""
    if problem := refusal(_task_named(ref)):
        return Outcome(failure=problem)
    if (known := _VERDICTS.get((ref, answer))) is not None:
        return known
    if (_VERIFIER.pid, ref) not in _built:
        built = _VERIFIER.call(["entry", ref], ENTRY_TIMEOUT_S)
        if not built.ok:
            return built
        _built.add((_VERIFIER.pid, ref))
    outcome = _VERIFIER.call(["score", ref, answer], timeout)
    if outcome.ok or outcome.failure.startswith("raised"):
        _VERDICTS.keep((ref, answer), outcome)
    return outcome


class _Verdicts:
    """The verdicts already given, by (entry reference, answer). Each answer is scored in a fresh copy of the same
    worker, so a verdict is a function of the entry and the answer alone: asking again (a GRPO group's repeated
    answers, greedy and sampled answers alike) would cost a fork and give the same. An overrun or a crash, which
    the machine's load may decide, is never kept. Safe between threads; the oldest go past ``size``."""

    def __init__(self, size: int) -> None:
        self.size, self._kept, self._lock = size, collections.OrderedDict(), threading.Lock()

    def get(self, key: tuple[str, str]) -> Outcome | None:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
            return self._kept.get(key)

    def keep(self, key: tuple[str, str], outcome: Outcome) -> None:
        with self._lock:
            self._kept[key] = outcome
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


_VERDICTS = _Verdicts(1 << 16)


def score_completion(completion: str, ref: str, solution_start: str, solution_end: str,
                     timeout: float = VERIFY_TIMEOUT_S) -> float:  # fmt: skip
    """The task's verifier on the stripped text in ``completion``'s answer slot (the grader's rule:
    ``grading.extract.answer_slot``), 0 to 1; 0 without a closed slot, or when the verifier raises, overruns
    ``timeout`` or hits a limit (one warning per task and kind of failure)."""
    slot = answer_slot(completion, solution_start, solution_end) if isinstance(completion, str) else None
    if slot is None or not slot[1]:
        return 0.0
    outcome = verify(ref, slot[0].strip(), timeout)
    if not outcome.ok:
        _warn_once(ref, outcome.failure)
        return 0.0
    value = outcome.value
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, float(value)))


def _task_named(ref: str) -> str:
    try:
        return str(json.loads(ref)["task"])
    except (ValueError, KeyError, TypeError):
        return "(unreadable entry reference)"


_WARNED: set[tuple[str, str]] = set()  # (task, kind of failure) warned about in this process
_WORDS = {
    "timeout": "overran its time on an answer",
    "crashed": "died on an answer (a memory or CPU limit, or a forbidden action)",
    "not started": "could not start its worker",
    "unexpected output": "wrote something that is not a reply (the call was discarded)",
}


def _warn_once(ref: str, failure: str) -> None:
    task = _task_named(ref)
    kind = failure.split(":")[0]  # "timeout", "crashed", "raised ValueError"
    if (task, kind) not in _WARNED:
        _WARNED.add((task, kind))
        logger.warning("reasoning_gym: the verifier of %s %s; scoring such answers 0", task, _WORDS.get(kind, failure))
