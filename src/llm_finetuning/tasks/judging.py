"""Who says an answer is right: the task the problem comes from.

A problem row knows its task. A reasoning-gym row (it carries ``reasoning_gym_entry``) is judged by that task's
own verifier, the one its ``reasoning_gym`` reward uses: word, list and grid answers are the task's to judge,
not the math grader's. Every other row (the generated sums, GSM8K, MATH, a user's dataset with an ``answer``
column) is judged by the math grader against its ``answer``. Evaluation's accuracy, GRPO's correctness gate and
``debug_grpo`` all ask ``task_for(row).is_right(...)``, so "right" means the same in every figure.

A new kind of task is one more class with ``owns``, ``is_right`` and ``start``, registered in ``TASKS`` before
the grader's (the grader owns every row, so it comes last). ``start_judges(rows)`` starts, in the background,
the worker of each task that judges some of ``rows`` (the grader's sympy worker, reasoning-gym's verifier),
whose imports take seconds: the pipeline starts them while GRPO's trainer starts its engine, an evaluation as it
starts generating, so no verdict waits for one.

    >>> task_for({"answer": "3"}).name, task_for({"answer": "3", "reasoning_gym_entry": "{...}"}).name
    ('graded', 'reasoning_gym')
    >>> task_for({"answer": "0.5"}).is_right("<SOLUTION>\\\\frac{1}{2}</SOLUTION>", {"answer": "0.5"}, AnswerTags())
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..grading import grade, start_worker
from . import gym

__all__ = ["TASKS", "AnswerTags", "GradedTask", "GymTask", "Task", "start_judges", "task_for"]


@dataclass(frozen=True)
class AnswerTags:
    """The tags around the answer slot (the prompt's ``solution_start`` and ``solution_end``)."""

    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"


class Task(Protocol):
    name: str

    def owns(self, row: Mapping[str, Any]) -> bool:
        """Whether this task judges answers to ``row``."""

    def is_right(self, completion: str, row: Mapping[str, Any], tags: AnswerTags) -> bool:
        """Whether ``completion`` answers ``row`` right (never raises, bounded in time)."""

    def start(self) -> None:
        """Start what ``is_right`` runs in, in the background; returns at once."""


@dataclass(frozen=True)
class GymTask:
    """A reasoning-gym task: its verifier's full score (1.0) on the text in the answer slot."""

    name: str = "reasoning_gym"
    timeout: float = gym.VERIFY_TIMEOUT_S

    def owns(self, row: Mapping[str, Any]) -> bool:
        return bool(row.get(gym.ENTRY_COLUMN))

    def is_right(self, completion: str, row: Mapping[str, Any], tags: AnswerTags) -> bool:
        score = gym.score_completion(completion, str(row[gym.ENTRY_COLUMN]), tags.solution_start,
                                     tags.solution_end, self.timeout)  # fmt: skip
        return score >= 1.0

    def start(self) -> None:
        gym.start_verifier()


@dataclass(frozen=True)
class GradedTask:
    """Any row with a gold ``answer``: the math grader's verdict (``grading.grade``)."""

    name: str = "graded"

    def owns(self, row: Mapping[str, Any]) -> bool:
        return True

    def is_right(self, completion: str, row: Mapping[str, Any], tags: AnswerTags) -> bool:
        return grade(completion, str(row.get("answer", "")), solution_start=tags.solution_start,
                     solution_end=tags.solution_end)  # fmt: skip

    def start(self) -> None:
        start_worker()


TASKS: tuple[Task, ...] = (GymTask(), GradedTask())  # the first that owns a row judges it


def task_for(row: Mapping[str, Any]) -> Task:
    """The task that judges answers to ``row``."""
    return next(task for task in TASKS if task.owns(row))


def start_judges(rows: Iterable[Mapping[str, Any]]) -> None:
    """Start the worker of every task that judges one of ``rows``, in the background; returns at once."""
    judges: dict[str, Task] = {}
    for row in rows:
        task = task_for(row)
        judges.setdefault(task.name, task)
    for task in judges.values():
        task.start()
