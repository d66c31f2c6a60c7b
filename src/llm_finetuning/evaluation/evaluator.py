"""Evaluate a model on held-out problems: greedy for format and answer accuracy, k samples for avg@k.

Used before SFT, after SFT (= GRPO step 0), every ``evaluation.grpo_every_steps`` during GRPO, and after GRPO, always on the
same problems so the numbers compare. Each evaluation shows one progress view (``reporting/progress.py``) and the greedy
answers to the first ``evaluation.sample_answers`` problems (the same problems every time, taken from the
completions the evaluation generates anyway), so a person sees what the model writes change. Generation
goes through the manager's engine (``evaluation.engine``: hf, vllm or Unsloth's); samples are drawn from
``seed`` in their own random stream, so an evaluation never moves training's random state and every stage is
scored on the same draws. Scoring is
``scoring.score_problems`` / ``scoring.figures``; the ``evaluate`` tool calls the same ``Evaluator`` (``score``
for the per-problem rows it writes). In a multi-process
run the ranks share the generation by whole batches (``sharding.generate_sharded``) and all score the gathered
completions: greedy figures equal one process's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..config import PipelineConfig
from ..errors import DataError
from ..reporting.progress import ProgressView, log_samples
from ..rollout import SamplingSettings, generation_budget
from ..rollout.settings import Progress
from ..tasks import start_judges
from .judge import CompletionJudge
from .scoring import by_difficulty, figures, sample_answers, score_problems
from .sharding import generate_sharded, own_share

logger = logging.getLogger(__name__)

# The figures a run records per evaluation (summary.json "eval", metrics.jsonl): the greedy ones, plus the
# answer accuracy of the k samples as sampled_answer_accuracy (avg@k); and, where the problems report their
# difficulty (a reasoning-gym task's settings), both per value of each setting as by_difficulty.
RECORDED = ("n", "format_accuracy", "answer_accuracy", "sampled_answer_accuracy", "reasoning_present",
            "avg_reasoning_length", "avg_total_reward")


def _cell(value: str, cell: dict[str, Any]) -> str:
    sampled = cell.get("sampled_answer_accuracy")
    return f"{value}: {cell['answer_accuracy']:.3f}" + ("" if sampled is None else f"/{sampled:.3f}") + f" (n={cell['n']})"


def difficulty_scalars(figures: dict[str, Any]) -> dict[str, float]:
    """``by_difficulty`` as flat metrics.jsonl figures: ``answer_accuracy/num_terms=3`` and its sampled twin."""
    flat = {}
    for setting, values in figures.get("by_difficulty", {}).items():
        for value, cell in values.items():
            for key in ("answer_accuracy", "sampled_answer_accuracy"):
                if cell.get(key) is not None:
                    flat[f"{key}/{setting}={value}"] = cell[key]
    return flat


@dataclass
class Evaluation:
    """One evaluation: its recorded figures (``RECORDED``) and sample answers (``scoring.sample_answers``)."""

    figures: dict[str, Any]
    samples: list[dict[str, Any]]


@dataclass
class Evaluator:
    """Scores a model on ``problems`` (rows with a conversation ``prompt`` and a string ``answer``)."""

    problems: Any  # datasets.Dataset or list of dicts
    judge: CompletionJudge
    greedy: SamplingSettings
    sampled: SamplingSettings | None = None  # None = no sampled accuracy (reported as None)
    batch_size: int = 32
    shown: int = 0  # problems whose greedy answers every evaluation shows and records

    @classmethod
    def from_config(cls, config: PipelineConfig, problems: Any, judge: CompletionJudge,
                    computed_budget: int | None, *, limit: int | None = None,
                    sampled_k: int | None = None, rollouts: bool = False) -> Evaluator:  # fmt: skip
        """The run's evaluator: the first ``limit`` problems (``evaluation.num_samples``), greedy plus ``sampled_k``
        samples each (``evaluation.sampled_k``) at evaluation's sampling settings (``evaluation.sampling``, else
        GRPO's; with ``rollouts``, GRPO's own: a pass rate as GRPO's groups will see it)."""
        evaluation = config.evaluation
        budget = generation_budget(config, computed_budget)
        limit = evaluation.num_samples if limit is None else limit
        return cls(
            problems.select(range(min(limit, len(problems)))),
            judge,
            SamplingSettings(greedy=True, max_new_tokens=budget),
            SamplingSettings.from_config(config, num_samples=sampled_k or evaluation.sampled_k,
                                         max_new_tokens=budget, seed=config.seed, evaluation=not rollouts),
            batch_size=evaluation.batch_size,
            shown=evaluation.sample_answers,
        )

    @classmethod
    def for_selection(cls, config: PipelineConfig, validation: Any, judge: CompletionJudge,
                      budget: int | None) -> Evaluator | None:  # fmt: skip
        """The evaluator of ``evaluation.selection_samples`` (what the evaluations during GRPO score): the held-out
        problems after the reported ones; None when that is 0."""
        count, start = config.evaluation.selection_samples, config.evaluation.num_samples
        if not count:
            return None
        if len(validation) < start + count:
            raise DataError(f"evaluation.selection_samples: {count} problems after the {start} reported need "
                            f"{start + count} held-out problems, and there are {len(validation)}; raise the held-out "
                            "count (data.reasoning_gym.num_eval, data.synthetic.num_eval) or lower selection_samples")  # fmt: skip
        return cls.from_config(config, validation.select(range(start, start + count)), judge, budget, limit=count)

    def evaluate(self, engine: Any, label: str, *, include_sampled: bool = True) -> Evaluation:
        """The recorded figures and sample answers of the model ``engine`` (``generation.engines``) runs."""
        started = time.perf_counter()
        sampled = include_sampled and self.sampled is not None  # periodic GRPO evaluations draw no samples
        total = self.completions(self.greedy) + (self.completions(self.sampled) if sampled else 0)
        with ProgressView(f"eval {label}", total, unit="completion") as view:
            rows = self.score(engine, label, progress=view.advance)
            greedy = figures(rows)
            sampled_accuracy, sampled_rows = None, None  # not a copy of the greedy figure when no samples are drawn
            if sampled:
                sampled_rows = self.score(engine, label, sampled=True, progress=view.advance)
                sampled_accuracy = figures(sampled_rows)["answer_accuracy"]
            result = {key: greedy.get(key) for key in RECORDED} | {"sampled_answer_accuracy": sampled_accuracy}
            sizes = by_difficulty(rows, sampled_rows)
            if sizes:
                result["by_difficulty"] = sizes
            view.close(result=f"answer {result['answer_accuracy']:.3f}")
        logger.info(
            "eval %s: n=%d format %.3f answer %.3f sampled %s reward %.2f (%.1fs, %s engine)",
            label, result["n"], result["format_accuracy"], result["answer_accuracy"],
            "-" if sampled_accuracy is None else f"{sampled_accuracy:.3f}", result["avg_total_reward"],
            time.perf_counter() - started, engine.name,
        )
        for setting, values in sizes.items():
            logger.info("  by %s: %s", setting, ", ".join(_cell(value, cell) for value, cell in values.items()))
        samples = sample_answers(rows, self.shown)
        log_samples(samples)
        return Evaluation(result, samples)

    def completions(self, sampling: SamplingSettings) -> int:
        """How many completions this process generates for the problems at ``sampling`` (its share)."""
        from transformers.integrations import is_deepspeed_zero3_enabled

        prompts = own_share(len(self.problems), self.batch_size, is_deepspeed_zero3_enabled())
        return prompts * sampling.per_prompt

    def score(self, engine: Any, label: str, *, sampled: bool = False,
              progress: Progress | None = None) -> list[dict[str, Any]]:  # fmt: skip
        """One scored row per problem (``scoring.score_problems``): greedy, or the ``sampled`` settings'.

        ``progress`` is told of the completions as they come; without it the call shows its own view.
        """
        from transformers.integrations import is_deepspeed_zero3_enabled

        sampling = self.sampled if sampled else self.greedy
        if sampling is None:
            raise ValueError("Evaluator.score(sampled=True): this evaluator draws no samples")
        if progress is None:
            with ProgressView(label, self.completions(sampling), unit="completion") as view:
                return self.score(engine, label, sampled=sampled, progress=view.advance)
        start_judges(self.problems)  # the verdicts' workers start while the completions generate, if not yet

        def generate(prompts: list[Any]) -> list[Any]:
            return engine.generate(prompts, sampling, batch_size=self.batch_size, progress=progress)

        prompts = [row["prompt"] for row in self.problems]
        # under ZeRO-3 transformers generates in lockstep across ranks (synced_gpus): equal batch counts
        groups = generate_sharded(generate, prompts, self.batch_size, lockstep=is_deepspeed_zero3_enabled())
        return score_problems(self.judge, self.problems, groups)
