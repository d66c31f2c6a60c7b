"""The run's evaluations, in one object the pipeline and the GRPO phase share: before and after each phase
(recorded in the summary, with a model card in the save they scored) and during GRPO (metrics.jsonl only,
greedy, on ``evaluation.selection_samples`` problems of their own when set).

Every rank evaluates (``evaluation/sharding.py`` shares the problems out); under ZeRO-3 the whole weights are
gathered first. An evaluation outside GRPO shuts an engine of ours down after it, so SFT never holds one; one
during GRPO keeps it for the next (GRPO's memory holds it).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from ..config import PipelineConfig
from ..model.card import CARD_FILE, model_card
from ..reporting.run_memory import RunMemory
from ..reporting.run_outputs import RunRecorder
from ..reporting.trackers import Trackers
from ..rollout.engines import HFEngine
from ..runtime.atomic_io import write_text_atomic
from ..runtime.distributed import full_weights, run_on_main
from .evaluator import Evaluator, difficulty_scalars
from .judge import CompletionJudge

logger = logging.getLogger(__name__)


class StageEvaluations:
    """Scores the model on the held-out problems and records what it scored (``evaluate``)."""

    def __init__(self, config: PipelineConfig, session: Any, judge: CompletionJudge, recorder: RunRecorder,
                 trackers: Trackers, memory: RunMemory) -> None:  # fmt: skip
        self.config, self.session, self.judge = config, session, judge
        self.recorder, self.trackers, self.memory = recorder, trackers, memory
        self.reported: Evaluator | None = None  # the problems every stage is scored on
        self.selector: Evaluator | None = None  # evaluation.selection_samples: what the evaluations in GRPO score

    def prepare(self, validation: Any, max_completion_length: int) -> None:
        """The evaluators over GRPO's validation split, and the engine they generate with (TRL's, where GRPO
        will have one)."""
        if not self.config.evaluation.enabled:
            return
        if validation is None or len(validation) == 0:
            logger.warning("no validation split (train_validation_split = 1.0): evaluations are skipped")
            return
        self.reported = Evaluator.from_config(self.config, validation, self.judge, max_completion_length)
        self.selector = Evaluator.for_selection(self.config, validation, self.judge, max_completion_length)
        _, reason = self.session.open_engine(trains=True)
        self.recorder.set(engine=self.session.engine.name, engine_reason=reason)

    def evaluate(self, stage: str, step: int, *, model: Any = None, during_grpo: bool = False) -> dict | None:
        """Score ``model`` (default: the manager's, its whole weights gathered under ZeRO-3) on every rank; return
        the figures (None with evaluations off). Its sample answers go to metrics.jsonl; a stage outside GRPO is
        recorded in the summary with its sampled figure and sample answers, and its save gets a model card."""
        evaluator = self.selector if during_grpo and self.selector is not None else self.reported
        if evaluator is None:
            return None
        manager = self.session.manager
        started = time.perf_counter()  # the engine's start counts: a user waits for it as for the answers
        weights = full_weights(manager.model) if model is None else contextlib.nullcontext(model)
        with self.memory.part("evaluation"), weights as current:
            engine = self.session.engine
            if isinstance(engine, HFEngine) and current is not manager.model:  # the trainer's unwrapped model
                engine = HFEngine(manager, model=current)
            evaluation = evaluator.evaluate(engine, stage, include_sampled=not during_grpo)
        seconds = round(time.perf_counter() - started, 2)
        self.recorder.metrics.write("eval", step, {"stage": stage, **evaluation.figures, "seconds": seconds,
                                                   **difficulty_scalars(evaluation.figures)})  # fmt: skip
        self.recorder.record_samples(stage, step, evaluation.samples)
        self.trackers.evaluation(stage, step, evaluation.figures, [] if during_grpo else evaluation.samples)
        if not during_grpo:
            self.recorder.record_eval(stage, evaluation.figures, evaluation.samples)
            self.session.engines.release_own()
            run_on_main(lambda: self.write_card(stage))
        return evaluation.figures

    def write_card(self, stage: str) -> None:
        """The model card of the weights the stage scored, into their save (``model/card.py``)."""
        folder = {"after_sft": self.config.sft_adapter_path, "after_grpo": self.config.grpo_adapter_path,
                  "after_expert_iteration": self.config.expert_iteration_adapter_path}.get(stage)  # fmt: skip
        if folder is not None and folder.is_dir():
            write_text_atomic(folder / CARD_FILE, model_card(self.recorder.summary, self.config.to_dict(), stage))
