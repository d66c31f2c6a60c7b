"""Phase 2, GRPO: sample a group of completions per prompt, score them with the rewards, reinforce the best.

Rewards and weights come from the registry; sampling from the section's TRL sampling fields
(``config.rollout_sampling``); what generates the rollouts is the run's plan (``RunPlan.rollouts``, the backend's choice: Unsloth's engine on the model, TRL's vLLM engine, or
``model.generate``). TRL's colocated engine on the hf backend is started with the log-prob mode the
importance-sampling rule chose and handed to the run's ``EngineOwner`` (``rollout/trl.py``), so evaluations
share it. The trainer is ours (``grpo_trainer.py``: what a step does beyond TRL's, hook by hook), given the
run's ``StepRecipe`` by ``GRPOPhase.recipe``. The run's
evaluations (``evaluation/stages.py``) score the validation problems every ``evaluation.grpo_every_steps`` from
a callback, greedy, with the same judge as the before/after evaluations; with ``keep_best`` the phase ends with
the best of them loaded (``training/selection.py``). Checkpoints go to ``<output_dir>/grpo/``.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..data import GRPOData
from ..evaluation.judge import CompletionJudge
from ..evaluation.stages import StageEvaluations
from ..model import ModelManager
from ..rollout import EngineOwner
from ..runtime import distributed
from ..session.plan import RunPlan
from .anchor import AnchorRows
from .arguments import GRPO_SETTINGS, grpo_arguments
from .callbacks import MetricsWriter, PeriodicEvaluation
from .curriculum import Curriculum
from .grpo_trainer import StepRecipe, grpo_trainer_class
from .health import GRPOHealth
from .phase import TrainingPhase, load_weights, save_weights
from .selection import GRPOWatch

logger = logging.getLogger(__name__)


class GRPOPhase(TrainingPhase):
    name = "grpo"
    title = "GRPO"
    settings_names = GRPO_SETTINGS
    section = "grpo_training"

    def __init__(
        self,
        config: PipelineConfig,
        plan: RunPlan,
        manager: ModelManager,
        engines: EngineOwner,
        data: GRPOData,
        reward_funcs: list[Any],
        reward_weights: list[float],
        metrics: MetricsWriter | None,
        judge: CompletionJudge | None = None,
        evaluations: StageEvaluations | None = None,
        start_adapter: Path | None = None,
        evaluate_first: bool = False,
        sft_rows: Any = None,
    ) -> None:
        callbacks: list[Any] = [GRPOHealth(config.grpo_training.advantages)]
        if evaluations is not None and config.evaluation.grpo_every_steps is not None:
            callbacks.append(PeriodicEvaluation(config.evaluation.grpo_every_steps, self.evaluate,
                                                self.model_for_generation))  # fmt: skip
        super().__init__(manager, Path(config.output_dir) / "grpo", metrics, callbacks)
        self.config, self.plan, self.engines, self.data = config, plan, engines, data
        self.evaluations, self.evaluate_first = evaluations, evaluate_first  # the run's (evaluation/stages.py)
        self.start_adapter = start_adapter or config.sft_adapter_path  # the weights GRPO starts from
        self.sft_rows = sft_rows  # SFT's dataset, for the anchor (sft_anchor); None without one
        self.watch = GRPOWatch()  # what the evaluations during GRPO decide (training/selection.py)
        self.passed_through = config.grpo_training.set_beyond_ours()
        self.reward_funcs, self.reward_weights = reward_funcs, reward_weights
        self.judge = judge or CompletionJudge(config.prompt, reward_funcs, reward_weights)  # the correctness gate's
        pairs = zip(reward_funcs, reward_weights, strict=True)  # the answer part of the reward, for the console
        self.answer_rewards = {f.__name__: weight for f, weight in pairs if getattr(f, "needs_answer", False)}

    def run(self, resume: bool = False, run_id: str | None = None) -> Any:
        self.run_id = run_id
        try:
            result = super().run(resume, run_id)
        finally:
            drop_reference_adapter(self.manager.model)  # not saved with the trained adapter
        if self.watch.best is not None:  # keep_best: the best of the evaluations' weights, not the last step's
            load = functools.partial(load_weights, self.manager)
            result.settings["kept_step"] = self.watch.keep_best(result.steps, self.evaluations, load)
        return result

    def started(self) -> None:
        """Between the trainer's build (its engine started) and its first step: the after-SFT evaluation on that
        engine where the run asks for it (one engine, not one for the evaluation and another for GRPO), and where
        GRPO starts for its evaluations' watch."""
        if self.evaluations is None:
            return
        if self.evaluate_first:
            self.evaluations.evaluate("after_sft", 0)
        self.watch = GRPOWatch.start_at(self.config, self.evaluations, self.start_adapter, self.run_id,
                                        functools.partial(save_weights, self.manager))  # fmt: skip

    def evaluate(self, model: Any, step: int) -> None:
        """An evaluation during GRPO (greedy, metrics.jsonl only), and what the watch makes of it."""
        self.watch.observe(step, self.evaluations.evaluate(f"grpo_step_{step}", step, model=model, during_grpo=True))


    def build_trainer(self) -> Any:
        from trl import GRPOConfig, GRPOTrainer  # after unsloth, when unsloth is the backend

        drop_reference_adapter(self.manager.model)  # a preflight's trainer made one: TRL refuses to add it twice
        plan = self.plan
        arguments = grpo_arguments(
            self.config, self.output_dir, plan, self.data.max_completion_length, self.reward_weights,
        ) | self.argument_overrides
        if plan.uses_vllm:
            logger.info("GRPO rollouts on vLLM (%s); importance-sampling correction %s", plan.rollouts,
                        plan.importance.reason)
        trainer_class = grpo_trainer_class(GRPOTrainer)
        if not plan.trl_engine:
            trainer = self._trainer(trainer_class, GRPOConfig(**arguments))
        else:
            from ..rollout import trl

            made = GRPOConfig(**arguments)
            made.device  # noqa: B018 - accelerate's process state is decided here, before TRL's engine start
            # sets the launcher variables vLLM reads: under them one process would train wrapped in DDP
            with trl.trl_engine_start(self.engines, plan.importance.engine_logprobs) as process_group_existed:
                trainer = self._trainer(trainer_class, made)
            trl.adopt(trainer, self.engines, process_group_existed)
        if trainer.ref_model is not None:  # full fine-tuning: TRL loaded the base model from its path
            trainer.ref_model = frozen_copy(trainer)
        return trainer

    def _trainer(self, trainer_class: type, arguments: Any) -> Any:
        return trainer_class(model=self.manager.model, args=arguments, reward_funcs=self.reward_funcs,
                             train_dataset=self.data.train, processing_class=self.manager.tokenizer,
                             recipe=self.recipe())  # fmt: skip

    def recipe(self) -> StepRecipe:
        """What the trainer's step does beyond TRL's (``grpo_trainer.py``), from the config and the plan."""
        section, plan = self.config.grpo_training, self.plan
        curriculum = Curriculum.of(self.data.train, section.curriculum_window, self.config.seed) \
            if section.curriculum else None  # fmt: skip
        anchor = None
        if section.sft_anchor > 0:
            assert self.sft_rows is not None, "sft_anchor: the pipeline hands GRPO the SFT dataset"
            # each process its own order of the rows (as each takes its own slice of GRPO's prompts)
            anchor = AnchorRows(self.sft_rows, self.manager.tokenizer, section.sft_anchor_rows,
                                self.config.seed * 1000 + distributed.rank())  # fmt: skip
        return StepRecipe(
            is_correct=self.judge.is_correct, estimator=section.advantages, tie_weight=section.tie_weight,
            oversample=section.oversample, drop_silent=section.drop_silent_groups,
            train_per_group=section.train_per_group, seed=self.config.seed,
            curriculum=curriculum,
            guidance=section.guidance,
            shared_prompt=plan.shares("grpo"), ratio_in_loss=plan.trl_loss,
            line_credit=section.line_credit, working_end=self.config.prompt.reasoning_end,
            answer_start=self.config.prompt.solution_start,
            anchor=anchor, anchor_weight=section.sft_anchor, negative_weight=section.negative_weight,
        )


def drop_reference_adapter(model: Any) -> None:
    """Delete the frozen copy of the adapter TRL adds as the KL reference (a LoRA model with beta > 0, adapter
    "ref"): it belongs to one trainer, and would be saved next to the trained adapter."""
    if "ref" in (getattr(model, "peft_config", None) or {}):
        model.delete_adapter("ref")


def frozen_copy(trainer: Any) -> Any:
    """The policy as it stands (after SFT), frozen, as the KL term's reference: TRL would reload the model from its
    path, which for a full fine-tune is the model before SFT."""
    import copy

    reference = copy.deepcopy(trainer.accelerator.unwrap_model(trainer.model)).eval()  # with TRL's fused head
    reference.requires_grad_(False)
    return trainer.accelerator.prepare_model(reference, evaluation_mode=True)
