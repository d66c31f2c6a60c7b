"""Evaluate a model on held-out problems: greedy for format and answer accuracy, k samples for avg@k.

Used before SFT, after SFT (= GRPO step 0), every ``eval_steps`` during GRPO, and after GRPO, always on the
same problems so the numbers compare.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from .generation import SamplingSettings, generate_completions
from .metrics import CompletionJudge, summarize

logger = logging.getLogger(__name__)


@dataclass
class Evaluator:
    """Scores a model on ``problems`` (rows with a conversation ``prompt`` and a string ``answer``)."""

    problems: Any  # datasets.Dataset or list of dicts
    judge: CompletionJudge
    greedy: SamplingSettings
    sampled: SamplingSettings | None = None  # None = no sampled accuracy (reported as None)
    batch_size: int = 32

    def evaluate(self, model: Any, tokenizer: Any, label: str, *, include_sampled: bool = True) -> dict[str, Any]:
        started = time.perf_counter()
        prompts = [row["prompt"] for row in self.problems]
        golds = [str(row["answer"]) for row in self.problems]
        greedy = [group[0] for group in self._generate(model, tokenizer, prompts, self.greedy, label)]
        sampled = None
        if include_sampled and self.sampled is not None:
            sampled = self._generate(model, tokenizer, prompts, self.sampled, f"{label} (sampled)")
        figures, _ = summarize(self.judge, greedy, sampled, golds)
        sampled_accuracy = figures["sampled_answer_accuracy"]
        logger.info(
            "eval %s: n=%d format %.3f answer %.3f sampled %s reward %.2f (%.1fs)",
            label, figures["n"], figures["format_accuracy"], figures["answer_accuracy"],
            "-" if sampled_accuracy is None else f"{sampled_accuracy:.3f}", figures["avg_total_reward"],
            time.perf_counter() - started,
        )
        return figures

    def _generate(self, model: Any, tokenizer: Any, prompts: list, sampling: SamplingSettings, label: str):
        return generate_completions(
            model, tokenizer, prompts, sampling, batch_size=self.batch_size, progress=True,
            description=f"eval {label}",
        )
