"""Expert iteration (rejection-sampling fine-tuning): learn from the answers alone by fine-tuning on what the
model itself got right.

It is the simplest thing to do with problems that have a final answer and no worked solution, and so the
baseline GRPO has to beat on them. Each of ``expert_iteration.rounds`` rounds:

1. takes the next ``problems_per_round`` GRPO training problems (cycling through them; only their prompt and
   answer are read), and samples ``samples_per_problem`` completions of each with the current model, at GRPO's
   sampling settings, on the run's evaluation engine (vLLM where the run has one), drawn from ``seed + round``
   (a worked or reference solution the rows may carry is dropped first: only answers are learned from);
2. keeps the completions the grader accepts that ended on their own (not cut at the token budget), each text
   once, at most ``keep_per_problem`` per problem (``accepted_rows``);
3. fine-tunes on them with SFT's trainer and ``sft_training``'s settings, for ``epochs_per_round`` passes at
   ``expert_iteration.learning_rate`` (checkpoints in ``<output_dir>/expert_iteration/round_<r>/``);
4. saves the adapter to ``<output_dir>/expert_iteration/final`` and records the round in ``run_state.json``,
   so ``--resume`` continues with the next round.

What each round sampled and kept goes to ``metrics.jsonl`` (phase ``expert_iteration_round``, step = round) and to
``summary.json``'s ``phases.expert_iteration.rounds``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..data.processor import SOLUTION_COLUMNS
from ..evaluation.evaluator import Evaluator
from ..evaluation.judge import CompletionJudge
from ..model import ModelManager
from ..reporting.run_outputs import MetricsWriter, RunState
from ..runtime.distributed import full_weights
from ..session.plan import RunPlan
from ..session.resume import EXPERT_ITERATION
from .phase import PhaseResult
from .sft import SFTPhase

__all__ = ["PHASE", "ROUNDS", "ExpertIteration", "accepted_rows", "round_problems"]

logger = logging.getLogger(__name__)

PHASE = EXPERT_ITERATION  # the phase's name: run_state.json, summary.json, its fine-tuning's metrics.jsonl records
ROUNDS = "expert_iteration_round"  # the metrics.jsonl records of what each round sampled and kept


def round_problems(count: int, per_round: int, round_index: int) -> list[int]:
    """The indices of the training problems a round samples: the next ``per_round``, from the start again at the end.

    >>> round_problems(5, 3, 0), round_problems(5, 3, 1)
    ([0, 1, 2], [3, 4, 0])
    """
    return [(round_index * per_round + offset) % count for offset in range(min(per_round, count))]


def accepted_rows(problems: Sequence[dict[str, Any]], scored: Sequence[dict[str, Any]],
                  keep_per_problem: int) -> list[dict[str, Any]]:  # fmt: skip
    """SFT rows (conversation ``prompt``, assistant ``completion``) of the completions the grader accepted and
    that ended on their own: each distinct text once (surrounding space aside), at most ``keep_per_problem`` per
    problem, in the order they were sampled."""
    rows = []
    for problem, result in zip(problems, scored, strict=True):
        kept: set[str] = set()
        for text, correct, finished in zip(result["completions"], result["correct"], result["finished"], strict=True):
            if correct and finished and text.strip() not in kept and len(kept) < keep_per_problem:
                kept.add(text.strip())
                rows.append({"prompt": problem["prompt"], "completion": [{"role": "assistant", "content": text}]})
    return rows


class RoundPhase(SFTPhase):
    """One round's fine-tuning: SFT's trainer on the kept completions, in the round's own folder."""

    name = PHASE

    def __init__(self, config: PipelineConfig, plan: RunPlan, manager: ModelManager, rows: Any,
                 metrics: MetricsWriter | None, round_index: int) -> None:  # fmt: skip
        super().__init__(config, plan, manager, rows, metrics, output_dir=_folder(config) / f"round_{round_index}")
        section = config.expert_iteration
        self.title = f"expert iteration {round_index + 1}/{section.rounds}"
        self.argument_overrides = {"max_steps": -1, "num_train_epochs": section.epochs_per_round,
                                   "learning_rate": section.learning_rate or config.sft_training.learning_rate}


class ExpertIteration:
    """The rounds over the manager's model, sampling on ``engine``; ``save(path)`` writes the adapter."""

    def __init__(self, config: PipelineConfig, plan: RunPlan, manager: ModelManager, engine: Any, train: Any,
                 judge: CompletionJudge, budget: int, metrics: MetricsWriter | None,
                 save: Callable[[Path], None]) -> None:  # fmt: skip
        self.config, self.plan, self.manager, self.engine = config, plan, manager, engine
        self.train, self.judge, self.budget, self.metrics, self.save = train, judge, budget, metrics, save
        self.section = config.expert_iteration

    def run(self, state: RunState, release_engine: Callable[[], None]) -> PhaseResult:
        """Every round not yet done (``state``); ``release_engine`` frees an engine of ours before each fine-tuning."""
        started, done = time.perf_counter(), state.load().get(PHASE, {})
        records = list(done.get("rounds", []))
        steps = sum(record["steps"] for record in records)
        for round_index in range(len(records), self.section.rounds):
            rows, record = self.sample(round_index)
            release_engine()  # the fine-tuning needs the memory; the next round's sampling starts it again
            record["steps"] = self.fine_tune(rows, round_index) if rows else 0
            steps += record["steps"]
            records.append(record)
            self.save(self.config.expert_iteration_adapter_path)
            state.mark_progress(PHASE, rounds=records)  # after the save: a recorded round is on disk
        return PhaseResult(steps, round(time.perf_counter() - started, 2), settings={"rounds": records})

    def sample(self, round_index: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The round's kept SFT rows, and what it sampled and kept."""
        clock = time.perf_counter()
        problems = self.train.select(round_problems(len(self.train), self.section.problems_per_round, round_index))
        problems = problems.remove_columns([c for c in SOLUTION_COLUMNS if c in problems.column_names])  # answers only
        sampler = Evaluator.from_config(self.config, problems, self.judge, self.budget, limit=len(problems),
                                        sampled_k=self.section.samples_per_problem, rollouts=True)  # fmt: skip
        sampler.sampled = dataclasses.replace(sampler.sampled, seed=self.config.seed + round_index)
        with full_weights(self.manager.model):
            scored = sampler.score(self.engine, f"expert iteration {round_index + 1}: sampling", sampled=True)
        rows = accepted_rows(list(problems), scored, self.section.keep_per_problem)
        correct = [flag for result in scored for flag in result["correct"]]
        record = {"round": round_index + 1, "problems": len(scored), "sampled": len(correct),
                  "accepted": sum(correct), "kept": len(rows), "solved": sum(any(r["correct"]) for r in scored),
                  "pass_rate": round(sum(correct) / max(len(correct), 1), 4),
                  "sampling_seconds": round(time.perf_counter() - clock, 2)}  # fmt: skip
        logger.info("expert iteration %d/%d: %d of %d completions accepted (%d of %d problems solved); %d kept",
                    round_index + 1, self.section.rounds, record["accepted"], record["sampled"], record["solved"],
                    record["problems"], record["kept"])  # fmt: skip
        if not rows:
            logger.warning("expert iteration %d: no completion was accepted, so nothing to fine-tune on this round; "
                           "train SFT longer or give it easier problems", round_index + 1)  # fmt: skip
        if self.metrics is not None:
            self.metrics.write(ROUNDS, round_index + 1, record)
        return rows, record

    def fine_tune(self, rows: list[dict[str, Any]], round_index: int) -> int:
        from datasets import Dataset

        phase = RoundPhase(self.config, self.plan, self.manager, Dataset.from_list(rows), self.metrics, round_index)
        return phase.run().steps


def _folder(config: PipelineConfig) -> Path:
    return Path(config.output_dir) / PHASE

