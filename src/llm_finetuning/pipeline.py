"""The whole run as one story: ``run(config, options) -> summary``, the programmatic API behind the CLI.

    >>> from llm_finetuning.config import PipelineConfig
    >>> from llm_finetuning.pipeline import RunOptions, run
    >>> summary = run(PipelineConfig.from_yaml("configs/tiny.yaml"), RunOptions())   # doctest: +SKIP

The steps are numbered in ``run`` and ``Run.steps`` below, in the order they happen. Finished phases are
recorded in ``run_state.json``, so ``--resume`` skips them and continues an unfinished phase from its newest
complete checkpoint. Nothing here imports trl or transformers before the backend is chosen: Unsloth, when it
is the backend, must be imported first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .config import PipelineConfig
from .data import GRPOData, load_grpo_data, load_sft_data
from .errors import TrainingInterrupted
from .evaluation.evaluator import Evaluator
from .evaluation.judge import CompletionJudge
from .logging_setup import setup_logging
from .model import ModelManager, choose_backend, import_unsloth
from .model.hardware import free_memory
from .rewards import build_rewards
from .run_outputs import RunRecorder

logger = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """What the command line says beyond the config."""

    skip_sft: bool = False  # continue from <output_dir>/sft/final (or the base model)
    skip_grpo: bool = False  # stop after SFT
    resume: bool = False  # continue unfinished phases from their newest complete checkpoint


def run(config: PipelineConfig, options: RunOptions | None = None) -> dict[str, Any]:
    """Run the pipeline; return the summary (also written to ``<output_dir>/summary.json``)."""
    options = options or RunOptions()
    started = time.perf_counter()
    # 0. output dir, logging, threads, the resolved config, a fresh (or resumed) summary; the backend is
    #    imported before anything pulls in trl/transformers
    output_dir = Path(config.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    setup_logging(config.log_level, output_dir)
    if config.num_threads is not None:  # CPU numerics depend on the thread count: fix it, don't inherit it
        torch.set_num_threads(config.num_threads)
    (output_dir / "config.yaml").write_text(config.to_yaml())
    recorder = RunRecorder.start(output_dir, resume=options.resume)
    if choose_backend(config.model)[0] == "unsloth":
        import_unsloth()
    story = Run(config, recorder)
    try:
        story.steps(options)
    except TrainingInterrupted:
        recorder.finish(time.perf_counter() - started, complete=False)
        raise
    finally:
        story.manager.free()  # the model and any vLLM engine go with the run, not with the process
    summary = recorder.finish(time.perf_counter() - started, complete=True)
    recorder.print_table()
    return summary


class Run:
    """One run's working state: the model, the GRPO data and the evaluator its steps share."""

    def __init__(self, config: PipelineConfig, recorder: RunRecorder) -> None:
        self.config, self.recorder = config, recorder
        self.reward_funcs, self.reward_weights = build_rewards(config.rewards, config.prompt)
        self.manager = ModelManager(config)
        self.grpo_data: GRPOData | None = None
        self.evaluator: Evaluator | None = None

    def steps(self, options: RunOptions) -> None:
        import transformers  # after the backend (pipeline.run imported Unsloth first when it is the backend)

        transformers.set_seed(self.config.seed)
        state = self.recorder.state
        sft_done_earlier = options.resume and state.is_done("sft")
        sft_now = not options.skip_sft and not sft_done_earlier
        grpo_now = not options.skip_grpo and not (options.resume and state.is_done("grpo"))
        self.load_model()  # 1. the model (a builtin demo model is built first)
        self.prepare_grpo_data()  # 2. GRPO data and the held-out problems every evaluation uses
        if sft_now:
            if self.config.evaluation.eval_before_sft:
                self.evaluate("before_sft", -1)  # 3. the untouched model
            self.train_sft(options.resume)  # 4. SFT, save sft/final, free the trainer's memory
        else:
            self.continue_from_sft(record_skip=not sft_done_earlier)  # 4'. sft/final (or the base model)
        if sft_now or (grpo_now and not self.recorder.has_eval("after_sft")):
            self.evaluate("after_sft", 0)  # 5. after SFT = GRPO step 0 (a resumed run keeps its figure)
        if not grpo_now:
            if not options.skip_grpo:
                logger.info("GRPO already finished (run_state.json); nothing to resume")
            return
        steps = self.train_grpo(options.resume)  # 6. GRPO with periodic evaluation, save the adapter
        self.evaluate("after_grpo", steps)  # 7. the trained model

    def load_model(self) -> None:
        self.manager.load()
        self.recorder.set(backend=self.manager.backend_name, backend_reason=self.manager.backend_reason)

    def prepare_grpo_data(self) -> None:
        """Built even with --skip-grpo: its validation split holds the problems every evaluation scores."""
        self.grpo_data = load_grpo_data(self.config, self.manager.tokenizer)
        validation = self.grpo_data.validation
        if not self.config.evaluation.enabled:
            return
        if validation is None or len(validation) == 0:
            logger.warning("no validation split (train_validation_split = 1.0): evaluations are skipped")
            return
        judge = CompletionJudge(self.config.prompt, self.reward_funcs, self.reward_weights)
        self.evaluator = Evaluator.from_config(
            self.config, validation, judge, self.grpo_data.max_completion_length
        )
        from .training.arguments import rollouts_share_engine

        shared = rollouts_share_engine(self.config, self.manager.backend_name)
        engine = self.manager.use_engine(self.config.evaluation.engine, rollouts_use_vllm=shared)
        self.recorder.set(engine=engine.name, engine_reason=self.manager.engine_reason)

    def evaluate(self, stage: str, step: int, *, record: bool = True, include_sampled: bool = True) -> None:
        if self.evaluator is None:
            return
        figures = self.evaluator.evaluate(self.manager.engine, stage, include_sampled=include_sampled)
        self.recorder.metrics.write("eval", step, {"stage": stage, **figures})
        if record:
            self.recorder.record_eval(stage, figures)

    def train_sft(self, resume: bool) -> None:
        from .training.sft import SFTPhase

        phase = SFTPhase(self.config, self.manager, load_sft_data(self.config, self.manager.tokenizer),
                         self.recorder.metrics)
        result = phase.run(resume=resume)
        self.manager.save_adapter(self.config.sft_adapter_path)
        self.recorder.state.mark_done("sft", steps=result.steps)
        self.recorder.record_phase("sft", result)
        del phase  # hand memory over to GRPO: the trainer, optimizer and data go now
        free_memory()

    def continue_from_sft(self, record_skip: bool) -> None:
        """Start from ``sft/final``; a resumed run keeps the SFT figures it recorded when SFT ran."""
        sft_final = self.config.sft_adapter_path
        if sft_final.is_dir():
            self.manager.load_adapter(sft_final)
        else:
            logger.warning("no SFT adapter at %s: GRPO starts from the base model", sft_final)
        if record_skip:
            self.recorder.record_skipped("sft")

    def train_grpo(self, resume: bool) -> int:
        from .training.grpo import GRPOPhase

        phase = GRPOPhase(
            self.config, self.manager, self.grpo_data, self.reward_funcs, self.reward_weights,
            self.recorder.metrics,
            evaluate=lambda model, step: self.evaluate(f"grpo_step_{step}", step, record=False,
                                                       include_sampled=False),
        )  # fmt: skip
        result = phase.run(resume=resume)
        save_path = self.config.grpo_adapter_path
        self.manager.save_adapter(save_path)
        self.recorder.state.mark_done("grpo", steps=result.steps)
        self.recorder.record_phase("grpo", result)
        self.recorder.set(save_path=str(save_path))
        return result.steps
