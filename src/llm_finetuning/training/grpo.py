"""Phase 2, GRPO: sample a group of completions per prompt, score them with the rewards, reinforce the best.

Rewards and weights come from the registry; sampling from ``vllm_sampling``; generation runs in vLLM when
the backend can (Unsloth fast inference, or vLLM installed on CUDA, or ``use_vllm: true`` with vLLM's CPU
build) and through ``model.generate`` otherwise. TRL's colocated engine on the hf backend is handed to the
run's ``ModelManager`` (``trl_vllm``), so evaluations share it. Evaluation on the validation problems runs
every ``eval_steps`` from a callback, greedy, with the same judge as the before/after evaluations.
Checkpoints go to ``<output_dir>/grpo/``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..data import GRPOData
from ..model import ModelManager
from . import trl_vllm
from .arguments import GRPO_SETTINGS, grpo_arguments, rollouts_share_engine
from .callbacks import MetricsWriter, PeriodicEvaluation
from .phase import TrainingPhase


class GRPOPhase(TrainingPhase):
    name = "grpo"
    settings_names = GRPO_SETTINGS

    def __init__(
        self,
        config: PipelineConfig,
        manager: ModelManager,
        data: GRPOData,
        reward_funcs: list[Any],
        reward_weights: list[float],
        metrics: MetricsWriter | None,
        evaluate: Callable[[Any, int], None] | None = None,
    ) -> None:
        callbacks = []
        if evaluate is not None and config.grpo_training.eval_strategy == "steps":
            callbacks.append(PeriodicEvaluation(config.grpo_training.eval_steps, evaluate, self.model_for_generation))
        super().__init__(manager, Path(config.output_dir) / "grpo", metrics, callbacks)
        self.config, self.data = config, data
        self.reward_funcs, self.reward_weights = reward_funcs, reward_weights

    def build_trainer(self) -> Any:
        from trl import GRPOConfig, GRPOTrainer  # after unsloth, when unsloth is the backend

        arguments = grpo_arguments(
            self.config, self.output_dir, self.manager.backend_name, self.data.max_completion_length,
            self.reward_weights,
        ) | self.argument_overrides
        if not rollouts_share_engine(self.config, self.manager.backend_name):
            return self._trainer(GRPOTrainer, GRPOConfig(**arguments))
        with trl_vllm.trl_engine_start(self.manager) as process_group_existed:
            trainer = self._trainer(GRPOTrainer, GRPOConfig(**arguments))
        trl_vllm.adopt(trainer, self.manager, process_group_existed)
        return trainer

    def _trainer(self, trainer_class: type, arguments: Any) -> Any:
        return trainer_class(
            model=self.manager.model,
            args=arguments,
            reward_funcs=self.reward_funcs,
            train_dataset=self.data.train,
            processing_class=self.manager.tokenizer,
        )
