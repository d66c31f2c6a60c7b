"""The ``reasoning_gym`` reward: a reasoning-gym task's own verifier on the completion's answer.

Why: the math grader judges numbers and expressions; reasoning-gym's ~100 tasks (lists, words, grids,
puzzles) each come with a verifier (``score_answer``, 0 to 1) that knows what a right answer to that task
looks like. With this reward any task's verifier can drive GRPO beside the grader's rewards.

How (``tasks.gym.score_completion``, which evaluation's verdict on these rows uses too): the answer is the
text in the answer slot, found by the grader's own rule
(``grading.extract.answer_slot``: the last ``<SOLUTION>…</SOLUTION>``, else ``<answer>…</answer>``, in the
model's own turn), stripped. The task's verifier scores it against the entry the problem came from, rebuilt
from the dataset's ``reasoning_gym_entry`` column (``reasoning_gym:<task>`` data has it, and TRL hands every
dataset column to the rewards). No slot, or a slot left open: 0. A row without the column (other data):
``None``, the reward does not apply. Building it needs the reasoning-gym extra (``uv sync --extra
reasoning-gym``); the config is refused in one line without it.

Several tasks' verifiers ``eval`` the answer or hand it to sympy, so the verifier never runs in the trainer:
``gym.verify`` runs it in a sandboxed worker process (started when the reward is built), with ``timeout``
seconds per answer. A verifier that raises, overruns or hits a limit scores 0, with one warning per task and
kind of failure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..tasks import gym
from .base import Reward, RewardParamError

__all__ = ["ReasoningGymScore"]
__doctest_requires__ = ("reasoning_gym",)  # tests/test_doctests.py skips the examples without the extra


@dataclasses.dataclass
class ReasoningGymScore(Reward):
    """The task's ``score_answer`` on the stripped text in the answer slot; 0 without a slot or when the
    verifier raises. Range 0 … +1.0 (scale it with the reward's ``weight``).

    >>> import json
    >>> from llm_finetuning.tasks.gym import entry_ref
    >>> sums = {"min_terms": 2, "max_terms": 2, "max_digits": 1}
    >>> ref = entry_ref("chain_sum", sums, seed=1, size=1, index=0)
    >>> json.loads(ref)["task"]  # entry 0 asks "4 - 1 ="
    'chain_sum'
    >>> ReasoningGymScore()(completions=["4 - 1 = 3<end_working_out><SOLUTION> 3 </SOLUTION>",
    ...                                  "<SOLUTION>4</SOLUTION>", "it is 3", "<SOLUTION>3"],
    ...                     reasoning_gym_entry=[ref] * 4)
    [1.0, 0.0, 0.0, 0.0]
    """

    name = "reasoning_gym"
    needs_answer = True
    gold_column = gym.ENTRY_COLUMN

    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    timeout: float = gym.VERIFY_TIMEOUT_S  # seconds of the verifier's time per answer; past it the answer scores 0

    def validate(self) -> None:
        for tag in ("solution_start", "solution_end"):
            self.require(bool(getattr(self, tag)), tag, "must be a non-empty tag")
        self.require(self.timeout > 0, "timeout", "must be a positive number of seconds")
        problem = gym.package_problem()
        if problem:
            raise RewardParamError(f"{self.name}: {problem}")

    def start(self) -> None:
        """Start the verifier's worker in the background (its imports take seconds, once)."""
        gym.start_verifier()

    def score_completion(self, text: str, gold: Any) -> float:
        return gym.score_completion(text, str(gold), self.solution_start, self.solution_end, self.timeout)

    def bounds(self) -> tuple[float, float]:
        return 0.0, 1.0

