"""The ``check_working`` reward: how far a completion's working follows its problem's worked solution.

Why: under the correctness gate (``grpo_training.advantages: gated``) a group whose answers are all wrong teaches
nothing, and on problems the policy never solves that is most groups (on SmolLM2 and chain_sum, the two-digit
sums). Yet their wrong answers are not equally wrong: one gets the first operation right and slips on the second,
another slips at once. Where a task's working is canonical (an arithmetic expression worked one operation a
line, as ``tasks/workings.py`` writes it), the worked solution says line by line what right working is, and the
number of its lines a completion reproduces before the first difference is credit for the steps it got right:
a process reward that agrees with correctness (a completion that reproduces every line has reached the answer),
unlike the format rewards, which pay wrong answers for their look. Given weight only where correctness ties
(``tie_weight`` > 0, the other rewards at weight 0), it turns an all-wrong group into one that pushes the
furthest-right working up.

How: the text before ``reasoning_end`` (the whole completion when it is cut short), its ``reasoning_start``
removed, split into lines, each line's spaces collapsed, blank lines dropped; the same of the worked solution
(the dataset's ``worked_completion`` column, which GRPO rows carry when guidance or this reward asks for it).
Score: the share of the worked solution's lines the completion reproduces, in order from its first line, up to
the first that differs. A row without a worked solution: ``None``, the reward does not apply.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..tasks.workings import WORKED_COLUMN
from .base import Reward

__all__ = ["CheckWorking"]


@dataclasses.dataclass
class CheckWorking(Reward):
    """The share of the worked solution's lines that the completion reproduces from the first, up to the first
    difference. Range 0 … +1.0 (scale it with the reward's ``weight``).

    >>> worked = "<start_working_out>6 - 0 + 5 = 6 + 5\\n6 + 5 = 11<end_working_out><SOLUTION>11</SOLUTION>"
    >>> CheckWorking()(completions=["6 - 0 + 5 = 6 + 5\\n6 + 5 = 11<end_working_out><SOLUTION>11</SOLUTION>",
    ...                             "6 - 0 + 5 =  6 + 5\\n6 + 5 = 12<end_working_out><SOLUTION>12</SOLUTION>",
    ...                             "6 - 0 = 6<end_working_out><SOLUTION>6</SOLUTION>", "6 - 0 + 5 = 6 + 5\\n"],
    ...                worked_completion=[worked] * 3 + [""])
    [1.0, 0.5, 0.0, None]
    """

    name = "check_working"
    needs_answer = True
    gold_column = WORKED_COLUMN

    reasoning_start: str = "<start_working_out>"
    reasoning_end: str = "<end_working_out>"

    def validate(self) -> None:
        self.require(bool(self.reasoning_end), "reasoning_end", "must be a non-empty tag")

    def score_completion(self, text: str, gold: Any) -> float | None:
        expected = self._lines(str(gold or ""))
        if not expected:
            return None
        followed = 0
        for written, wanted in zip(self._lines(text), expected, strict=False):
            if written != wanted:
                break
            followed += 1
        return followed / len(expected)

    def _lines(self, text: str) -> list[str]:
        """The working's non-blank lines, spaces collapsed: what comes before the reasoning's end tag."""
        working = text.split(self.reasoning_end, 1)[0]
        if self.reasoning_start:
            working = working.replace(self.reasoning_start, "")
        return [line for line in (" ".join(raw.split()) for raw in working.splitlines()) if line]

    def bounds(self) -> tuple[float, float]:
        return 0.0, 1.0
