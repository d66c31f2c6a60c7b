"""Phase 1, SFT: teach the output format on prompt/completion conversations with TRL's SFTTrainer.

The loss covers the completion only (reasoning, tags and answer), not the prompt. Checkpoints go to
``<output_dir>/sft/``; the pipeline saves the final adapter to ``<output_dir>/sft/final``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..model import ModelManager
from ..session.plan import RunPlan
from . import shared_prompt
from .arguments import SFT_SETTINGS, sft_arguments
from .callbacks import MetricsWriter
from .phase import TrainingPhase


class SFTPhase(TrainingPhase):
    name = "sft"
    title = "SFT"
    settings_names = SFT_SETTINGS
    section = "sft_training"

    def __init__(self, config: PipelineConfig, plan: RunPlan, manager: ModelManager, train_dataset: Any,
                 metrics: MetricsWriter | None, output_dir: Path | None = None) -> None:  # fmt: skip
        super().__init__(manager, output_dir or Path(config.output_dir) / "sft", metrics)
        self.config, self.plan, self.train_dataset = config, plan, train_dataset
        self.passed_through = tuple(config.sft_training.trl)

    def build_trainer(self) -> Any:
        from trl import SFTConfig, SFTTrainer  # after unsloth, when unsloth is the backend

        arguments = sft_arguments(self.config, self.output_dir, self.plan)
        args = SFTConfig(**{**arguments, **self.argument_overrides})
        trainer = SFTTrainer(
            model=self.manager.model, args=args, train_dataset=self.train_dataset,
            processing_class=self.manager.tokenizer,
        )
        if self.plan.shares("sft"):
            shared_prompt.install_sft(trainer)
        return trainer
