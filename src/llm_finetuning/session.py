"""One run's working state and its steps: data, model, evaluations, SFT, memory handover, GRPO, save.

``pipeline.run`` builds a ``RunSession`` once the backend is imported in the right order, then calls
``run(options)``; each step below is one short method so the order reads as the story in pipeline.py.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .config import PipelineConfig
from .data import DatasetLoader, DatasetProcessor
from .data.synthetic import tokenizer_corpus_for
from .evaluation.evaluator import Evaluator
from .evaluation.generation import SamplingSettings
from .evaluation.metrics import CompletionJudge
from .model import ModelManager
from .rewards import build_rewards
from .run_outputs import RunRecorder
from .training.callbacks import MetricsWriter
from .training.checkpoints import RunState
from .training.grpo_trainer import GRPOTrainingPipeline
from .training.phase import free_memory
from .training.sft_trainer import SFTTrainingPipeline

logger = logging.getLogger(__name__)


class RunSession:
    def __init__(self, config: PipelineConfig, recorder: RunRecorder) -> None:
        self.config, self.recorder = config, recorder
        self.output_dir = Path(config.output_dir)
        self.metrics = MetricsWriter(recorder.metrics_path)
        self.state = RunState(self.output_dir)
        self.reward_funcs, self.reward_weights = build_rewards(config.rewards, config.prompt)
        self.manager: ModelManager | None = None
        self.grpo_data: Any = None
        self.evaluator: Evaluator | None = None

    @property
    def sft_final(self) -> Path:
        return self.config.sft_adapter_path

    @property
    def save_path(self) -> Path:
        return self.config.grpo_adapter_path

    def run(self, options: Any) -> None:
        import transformers

        transformers.set_seed(self.config.seed)
        if not options.resume:
            for phase in ("sft", "grpo"):
                self.state.clear(phase)
        self.load_model()
        self.prepare_grpo_data()
        sft_ran = self.sft_phase(options)
        if not options.skip_grpo:
            self.grpo_phase(options, sft_ran)

    def load_model(self) -> None:
        self.manager = ModelManager(self.config, tokenizer_corpus=tokenizer_corpus_for(self.config))
        self.manager.load()
        self.recorder.set(backend=self.manager.backend_name, backend_reason=self.manager.backend_reason)

    def prepare_grpo_data(self) -> None:
        """GRPO rows and the held-out problems every evaluation uses (needed even when GRPO is skipped)."""
        spec = self.config.data.grpo
        raw = DatasetLoader(spec, self.config.data.seed, synthetic=self.config.data.synthetic).load()
        processor = DatasetProcessor(self.config, self.manager.tokenizer)
        self.grpo_data = processor.grpo_dataset(raw, spec)
        self.evaluator = self._build_evaluator(self.grpo_data.validation)

    def _build_evaluator(self, validation: Any) -> Evaluator | None:
        evaluation = self.config.evaluation
        if not evaluation.enabled:
            return None
        if validation is None or len(validation) == 0:
            logger.warning("no validation split (train_validation_split = 1.0): evaluations are skipped")
            return None
        problems = validation.select(range(min(evaluation.num_samples, len(validation))))
        max_new = evaluation.max_new_tokens or self.grpo_data.max_completion_length
        sampling = self.config.vllm_sampling
        sampled = SamplingSettings(
            greedy=False, num_samples=evaluation.sampled_k, temperature=sampling.temperature,
            top_p=sampling.top_p, top_k=sampling.top_k, min_p=sampling.min_p, max_new_tokens=max_new,
        )
        judge = CompletionJudge(self.config.prompt, self.reward_funcs, self.reward_weights)
        greedy = SamplingSettings(greedy=True, max_new_tokens=max_new)
        return Evaluator(problems, judge, greedy, sampled, batch_size=evaluation.batch_size)

    def evaluate(self, stage: str, step: int, *, record: bool = True, include_sampled: bool = True) -> None:
        if self.evaluator is None:
            return
        model, tokenizer = self.manager.model, self.manager.tokenizer
        figures = self.evaluator.evaluate(model, tokenizer, stage, include_sampled=include_sampled)
        self.metrics.write("eval", step, {"stage": stage, **figures})
        if record:
            self.recorder.record_eval(stage, figures)

    def sft_phase(self, options: Any) -> bool:
        """Run SFT unless skipped or already finished; return whether it ran now."""
        finished_earlier = options.resume and self.state.is_done("sft")
        if options.skip_sft or finished_earlier:
            self._continue_from_sft(record_skip=not finished_earlier)
            return False
        if self.config.evaluation.eval_before_sft:
            self.evaluate("before_sft", -1)
        spec = self.config.data.sft
        raw = DatasetLoader(spec, self.config.data.seed, synthetic=self.config.data.synthetic).load()
        dataset = DatasetProcessor(self.config, self.manager.tokenizer).sft_dataset(raw, spec)
        phase = SFTTrainingPipeline(
            self.config, self.manager.model, self.manager.tokenizer, dataset, self.manager.backend_name, self.metrics
        )
        result = phase.run(resume=options.resume)
        self.manager.save_adapter(self.sft_final)
        self.state.mark_done("sft", steps=result.steps)
        self._record_phase("sft", result)
        del phase, dataset, raw  # hand memory over to GRPO: the trainer, optimizer and data go now
        free_memory()
        self.evaluate("after_sft", 0)
        return True

    def _record_phase(self, phase: str, result: Any) -> None:
        resumed = {"resumed_from": result.resumed_from} if result.resumed_from else {}
        self.recorder.record_phase(phase, result.steps, result.seconds, **resumed)

    def _continue_from_sft(self, record_skip: bool) -> None:
        """Start from ``sft/final``; a resumed run keeps the SFT figures it recorded when SFT ran."""
        if self.sft_final.is_dir():
            self.manager.load_adapter(self.sft_final)
        else:
            logger.warning("no SFT adapter at %s: GRPO starts from the base model", self.sft_final)
        if record_skip:
            self.recorder.record_phase("sft", 0, 0.0, skipped=True)

    def grpo_phase(self, options: Any, sft_ran: bool) -> None:
        if options.resume and self.state.is_done("grpo"):
            logger.info("GRPO already finished (run_state.json); nothing to resume")
            return
        if not (sft_ran or (options.resume and self.recorder.summary["eval"]["after_sft"])):
            self.evaluate("after_sft", 0)  # GRPO step 0 when SFT was skipped or finished earlier
        phase = GRPOTrainingPipeline(
            self.config, self.manager.model, self.manager.tokenizer, self.grpo_data.train,
            self.reward_funcs, self.reward_weights, self.grpo_data.max_completion_length,
            self.manager.backend_name, self.metrics,
            evaluate=lambda model, step: self.evaluate(f"grpo_step_{step}", step, record=False,
                                                       include_sampled=False),
        )
        result = phase.run(resume=options.resume)
        self.manager.save_adapter(self.save_path)
        self.state.mark_done("grpo", steps=result.steps)
        self._record_phase("grpo", result)
        self.recorder.set(save_path=str(self.save_path))
        self.evaluate("after_grpo", result.steps)
