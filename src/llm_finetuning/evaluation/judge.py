"""``CompletionJudge``: format, answer correctness, reasoning and the configured rewards of one completion.

Training and evaluation judge with the same code: format accuracy is the ``match_format_exactly`` reward
(> 0), answer correctness is the problem's task's verdict (``tasks.task_for(row)``: a reasoning-gym task's own
verifier for its rows, the math grader behind the answer rewards for every other row), and the total
reward is the weighted sum of the rewards GRPO optimises, called as TRL calls them. The chat template
prefills the reasoning start tag, so a completion's reasoning is the text before the reasoning end tag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import PromptConfig
from ..grading import extract_answer
from ..rewards import get_reward
from ..tasks import AnswerTags, task_for


@dataclass
class CompletionJudge:
    """Judges completions with the prompt's tags and the run's rewards."""

    prompt: PromptConfig  # the tags
    reward_funcs: Sequence[Any] = ()  # built rewards, as GRPO uses them
    reward_weights: Sequence[float] = ()

    def __post_init__(self) -> None:
        tags = {t: getattr(self.prompt, t) for t in ("reasoning_end", "solution_start", "solution_end")}
        self._format = get_reward("match_format_exactly", **tags)
        self._tags = AnswerTags(self.prompt.solution_start, self.prompt.solution_end)

    def is_formatted(self, completions: Sequence[str]) -> list[bool]:
        return [score > 0 for score in self._format(completions=list(completions))]

    def is_correct(self, completion: str, row: Mapping[str, Any]) -> bool:
        """Whether ``completion`` answers the problem ``row`` (its ``answer`` and the columns its task reads) right."""
        return task_for(row).is_right(completion, row, self._tags)

    def answer(self, completion: str) -> str | None:
        """The answer the grader reads from the completion (None when it holds none)."""
        return extract_answer(completion, self.prompt.solution_start, self.prompt.solution_end)

    def reasoning(self, completion: str) -> str:
        """The reasoning text: everything before the reasoning end tag (empty when the tag is missing)."""
        end = completion.find(self.prompt.reasoning_end)
        return completion[:end].strip() if end >= 0 else ""

    def reward_scores(
        self,
        prompts: Sequence[Any],
        completions: Sequence[str],
        golds: Sequence[str],
        columns: dict[str, Sequence[Any]] | None = None,
    ) -> dict[str, list[float]]:
        """Each reward's score per completion, called as TRL calls it: with the answers and the dataset's other
        ``columns`` (one value per completion; the ``reasoning_gym`` reward reads its entry from one);
        ``None`` (does not apply) counts as 0."""
        kwargs = {
            **(columns or {}),
            "prompts": list(prompts),
            "completions": list(completions),
            "answer": list(golds),
        }
        return {
            func.__name__: [0.0 if s is None else float(s) for s in func(**kwargs)] for func in self.reward_funcs
        }

    def row_scores(self, row: Mapping[str, Any], completions: Sequence[str]) -> dict[str, list[float]]:
        """Each reward's score per completion, all of them answers to the problem ``row`` (its ``prompt``, its
        ``answer`` and the other columns TRL would hand the rewards)."""
        n = len(completions)
        columns = {key: [value] * n for key, value in row.items() if key not in ("prompt", "answer")}
        return self.reward_scores([row["prompt"]] * n, completions, [str(row["answer"])] * n, columns)

    def total_rewards(self, scores: dict[str, list[float]]) -> list[float]:
        """The summed reward GRPO optimises: each reward's score times its weight, per completion."""
        columns = [[weight * s for s in column]
                   for weight, column in zip(self.reward_weights, scores.values(), strict=True)]
        totals = [0.0] * len(next(iter(scores.values()), []))
        for column in columns:
            totals = [t + s for t, s in zip(totals, column, strict=True)]
        return totals
