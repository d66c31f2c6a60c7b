"""The evaluations during GRPO: ``grpo_training.keep_best`` keeps the weights with the best greedy accuracy, not
the last; ``held_out_warning`` says when the accuracy falls clearly below where GRPO started.

A GRPO run's last step is not always its best (small models drift; see docs/benchmarks.md). The evaluations
during GRPO already score the policy every ``evaluation.grpo_every_steps``; with ``keep_best`` each one that beats every earlier
one (the policy GRPO started from included, as step 0) saves its weights to ``<output_dir>/grpo/best``, the last
step is scored too, and the final adapter is the best of them, with the step recorded. The choice is made on
the evaluations during GRPO, which score ``evaluation.selection_samples`` problems of their own when that is
set, so the after-GRPO figure is not the figure the adapter was chosen by. ``grpo/best.json`` keeps the choice
across a ``--resume``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime.atomic_io import write_json_atomic

__all__ = ["BestWeights", "GRPOWatch", "held_out_warning"]  # GRPOWatch.start, .keep_best: the GRPO phase's

logger = logging.getLogger(__name__)


@dataclass
class BestWeights:
    """The best greedy accuracy seen so far during GRPO, at which step, and where its weights are."""

    folder: Path  # <output_dir>/grpo/best
    start: Path  # the weights GRPO started from (sft/final): what "step 0" keeps
    run_id: str | None
    accuracy: float = -1.0
    step: int = -1

    @classmethod
    def load(cls, folder: Path, start: Path, run_id: str | None) -> BestWeights:
        """The choice an earlier attempt of this run recorded, if any."""
        best = cls(folder, start, run_id)
        try:
            saved = json.loads(best._record.read_text())
        except (OSError, ValueError):
            return best
        if saved.get("run_id") == run_id:
            best.accuracy, best.step = float(saved["accuracy"]), int(saved["step"])
        return best

    @property
    def _record(self) -> Path:
        return self.folder.parent / "best.json"

    def consider(self, step: int, accuracy: float, save: Callable[[Path], None]) -> None:
        """Keep the policy of ``step`` if it beats every earlier one (``save(folder)`` writes its weights)."""
        if accuracy <= self.accuracy:
            return
        if step > 0:
            save(self.folder)
        self.accuracy, self.step = accuracy, step
        write_json_atomic(self._record, {"run_id": self.run_id, "step": step, "accuracy": accuracy})
        logger.info("keep_best: step %d is the best so far (greedy %.3f)", step, accuracy)

    def weights(self) -> Path:
        """Where the kept weights are: GRPO's best step's, or the starting policy's when no step beat it."""
        return self.folder if self.step > 0 else self.start


def held_out_warning(start: float, now: float, n: int, step: int) -> str | None:
    """The warning for a held-out accuracy ``now`` (at GRPO step ``step``, on ``n`` problems) two standard errors
    below ``start`` (after SFT); None when it is not."""
    spread = math.sqrt(max(start * (1 - start), now * (1 - now), 1e-4) * 2 / max(n, 1))
    if now >= start - 2 * spread:
        return None
    return (f"GRPO step {step}: held-out accuracy {now:.3f}, below the {start:.3f} it started from; set "
            "grpo_training.keep_best: true to keep the best adapter, lower grpo_training.learning_rate, or set "
            "grpo_training.beta")  # fmt: skip


class GRPOWatch:
    """What each evaluation during GRPO decides: where GRPO started (the first figure it sees), a warning once
    when the accuracy falls clearly below that, and with ``best`` (``keep_best``) the best weights so far, which
    ``save(folder)`` writes."""

    def __init__(self, best: BestWeights | None = None, save: Callable[[Path], None] = lambda folder: None) -> None:
        self.best, self.save = best, save
        self.start: float | None = None  # greedy accuracy where GRPO started, on the problems it is scored on
        self.warned = False

    @classmethod
    def start_at(cls, config: Any, evaluations: Any, start_adapter: Path, run_id: str | None,
                 save: Callable[[Path], None]) -> GRPOWatch:  # fmt: skip
        """Where GRPO starts, on the problems its evaluations score: after SFT's figure, or (with
        ``evaluation.selection_samples``) an evaluation of its own as step 0; and, with ``keep_best``, the choice an
        earlier attempt of this run made."""
        best = BestWeights.load(Path(config.output_dir) / "grpo" / "best", start_adapter, run_id) \
            if config.grpo_training.keep_best else None  # fmt: skip
        watch = cls(best, save)
        evals = evaluations.recorder.summary["eval"]
        after_sft = evals.get("after_expert_iteration") or evals.get("after_sft")  # where GRPO starts
        if evaluations.selector is not None:
            watch.observe(0, evaluations.evaluate("grpo_step_0", 0, during_grpo=True))
        elif after_sft:
            watch.observe(0, after_sft)
        return watch

    def keep_best(self, last_step: int, evaluations: Any, load: Callable[[Path], None]) -> int:
        """The last step scored like the others; the best of them loaded into the model (``load``). Returns its
        step."""
        best = self.best
        if best.step < last_step:  # a resumed run may have scored it already
            self.observe(last_step, evaluations.evaluate(f"grpo_step_{last_step}", last_step, during_grpo=True))
        if best.step != last_step:
            load(best.weights())
            logger.info("keep_best: the adapter of step %d (greedy %.3f) is kept, not the last step's", best.step,
                        best.accuracy)  # fmt: skip
        return best.step

    def observe(self, step: int, figures: dict[str, Any] | None) -> None:
        if figures is None:  # evaluations off
            return
        accuracy = figures["answer_accuracy"]
        if self.start is None:
            self.start = accuracy
        elif (warning := held_out_warning(self.start, accuracy, figures["n"], step)) and not self.warned:
            self.warned = True
            logger.warning(warning)
        if self.best is not None:
            self.best.consider(step, accuracy, save=self.save)
