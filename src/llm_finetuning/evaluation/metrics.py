"""Score generated completions: format, answer correctness, reasoning, and the configured rewards.

Training and evaluation judge with the same code: format accuracy is the ``match_format_exactly`` reward
(> 0), answer accuracy is the math grader's ``grade`` and the total reward is the weighted sum of the rewards
GRPO optimises. The chat template prefills the reasoning start tag, so a completion's reasoning is the text
before the reasoning end tag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from ..grading import grade, warm_up
from ..rewards import get_reward


@dataclass
class CompletionJudge:
    """Judges completions with the prompt's tags and the run's rewards."""

    prompt: Any  # PromptConfig: the tags
    reward_funcs: Sequence[Any] = ()  # built rewards, as GRPO uses them
    reward_weights: Sequence[float] = ()

    def __post_init__(self) -> None:
        tags = {t: getattr(self.prompt, t) for t in ("reasoning_end", "solution_start", "solution_end")}
        self._format = get_reward("match_format_exactly", **tags)

    def is_formatted(self, completions: Sequence[str]) -> list[bool]:
        return [score > 0 for score in self._format(completions=list(completions))]

    def is_correct(self, completion: str, gold: str) -> bool:
        return grade(completion, gold, solution_start=self.prompt.solution_start,
                     solution_end=self.prompt.solution_end)

    def reasoning(self, completion: str) -> str:
        """The reasoning text: everything before the reasoning end tag (empty when the tag is missing)."""
        end = completion.find(self.prompt.reasoning_end)
        return completion[:end].strip() if end >= 0 else ""

    def total_rewards(self, completions: Sequence[str], golds: Sequence[str]) -> list[float]:
        totals = [0.0] * len(completions)
        for func, weight in zip(self.reward_funcs, self.reward_weights, strict=True):
            scores = func(prompts=None, completions=list(completions), answer=list(golds))
            totals = [t + weight * (s or 0.0) for t, s in zip(totals, scores, strict=True)]
        return totals


def summarize(judge: CompletionJudge, greedy: Sequence[str], sampled: Sequence[Sequence[str]] | None,
              golds: Sequence[str]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The evaluation figures for greedy completions (and k samples per problem), plus per-problem rows."""
    # A symbolic comparison that finds the sympy worker still starting counts as "not equal": wait for it
    # (seconds, once per process) so the first problems are judged like the rest.
    warm_up()
    n = len(greedy)
    formatted = judge.is_formatted(greedy)
    correct = [judge.is_correct(c, g) for c, g in zip(greedy, golds, strict=True)]
    reasoning = [judge.reasoning(c) for c in greedy]
    rewards = judge.total_rewards(greedy, golds)
    # None when no samples were drawn (periodic GRPO evaluations are greedy only): a copy of the greedy
    # figure would draw a sampled curve that was never measured
    sampled_accuracy = None
    if sampled:
        per_problem = [mean(judge.is_correct(c, g) for c in group) for group, g in zip(sampled, golds, strict=True)]
        sampled_accuracy = round(mean(per_problem), 4) if n else 0.0
    figures = {
        "n": n,
        "format_accuracy": _share(formatted),
        "answer_accuracy": _share(correct),
        "sampled_answer_accuracy": sampled_accuracy,
        "reasoning_present": _share([bool(r) for r in reasoning]),
        "avg_reasoning_length": round(mean(len(r) for r in reasoning), 2) if n else 0.0,
        "avg_total_reward": round(mean(rewards), 4) if n else 0.0,
    }
    rows = [
        {"completion": c, "gold": g, "formatted": f, "correct": ok, "total_reward": r}
        for c, g, f, ok, r in zip(greedy, golds, formatted, correct, rewards, strict=True)
    ]
    return figures, rows


def _share(flags: Sequence[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0
