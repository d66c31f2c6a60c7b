"""Evaluate a model on held-out problems: greedy for format and answer accuracy, k samples for avg@k.

Used before SFT, after SFT (= GRPO step 0), every ``eval_steps`` during GRPO, and after GRPO, always on the
same problems so the numbers compare. Scoring is ``scoring.score_problems`` / ``scoring.figures``, the same
path the ``evaluate`` tool takes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import torch

from ..config import PipelineConfig
from ..generation import SamplingSettings, generate_detailed, generation_budget
from .judge import CompletionJudge
from .scoring import figures, score_problems

logger = logging.getLogger(__name__)

# The figures a run records per evaluation (summary.json "eval", metrics.jsonl): the greedy ones, plus the
# answer accuracy of the k samples as sampled_answer_accuracy (avg@k).
RECORDED = ("n", "format_accuracy", "answer_accuracy", "sampled_answer_accuracy", "reasoning_present",
            "avg_reasoning_length", "avg_total_reward")


@dataclass
class Evaluator:
    """Scores a model on ``problems`` (rows with a conversation ``prompt`` and a string ``answer``)."""

    problems: Any  # datasets.Dataset or list of dicts
    judge: CompletionJudge
    greedy: SamplingSettings
    sampled: SamplingSettings | None = None  # None = no sampled accuracy (reported as None)
    batch_size: int = 32
    seed: int = 0  # sampled evaluation draws from its own generator seeded with this, at every call

    @classmethod
    def from_config(cls, config: PipelineConfig, problems: Any, judge: CompletionJudge,
                    computed_budget: int | None) -> Evaluator:
        """The run's evaluator: the first ``evaluation.num_samples`` problems, greedy plus ``sampled_k`` samples."""
        from ..grading import start_worker

        start_worker()  # the grader's symbolic worker starts now, not at the first comparison that needs it
        evaluation = config.evaluation
        budget = generation_budget(config, computed_budget)
        return cls(
            problems.select(range(min(evaluation.num_samples, len(problems)))),
            judge,
            SamplingSettings(greedy=True, max_new_tokens=budget),
            SamplingSettings.from_config(config, num_samples=evaluation.sampled_k, max_new_tokens=budget),
            batch_size=evaluation.batch_size,
            seed=config.seed,
        )

    def evaluate(self, model: Any, tokenizer: Any, label: str, *, include_sampled: bool = True) -> dict[str, Any]:
        started = time.perf_counter()
        greedy = figures(self._score(model, tokenizer, self.greedy, label))
        sampled_accuracy = None  # periodic GRPO evaluations draw no samples: not a copy of the greedy figure
        if include_sampled and self.sampled is not None:
            # The same seed at every call, on a forked generator: the figure depends on the model alone (not
            # on what ran before it, e.g. a resume or another evaluation), and training's random stream is
            # the same whether or not evaluations run.
            devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(self.seed)
                sampled = self._score(model, tokenizer, self.sampled, f"{label} (sampled)")
            sampled_accuracy = figures(sampled)["answer_accuracy"]
        result = {key: greedy.get(key) for key in RECORDED} | {"sampled_answer_accuracy": sampled_accuracy}
        logger.info(
            "eval %s: n=%d format %.3f answer %.3f sampled %s reward %.2f (%.1fs)",
            label, result["n"], result["format_accuracy"], result["answer_accuracy"],
            "-" if sampled_accuracy is None else f"{sampled_accuracy:.3f}", result["avg_total_reward"],
            time.perf_counter() - started,
        )
        return result

    def _score(self, model: Any, tokenizer: Any, sampling: SamplingSettings, label: str) -> list[dict[str, Any]]:
        groups = generate_detailed(
            model, tokenizer, [row["prompt"] for row in self.problems], sampling, batch_size=self.batch_size,
            progress=True, description=f"eval {label}",
        )
        return score_problems(self.judge, self.problems, groups)
