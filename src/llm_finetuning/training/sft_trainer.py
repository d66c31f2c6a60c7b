"""Phase 1, SFT: teach the output format on prompt/completion conversations with TRL's SFTTrainer.

The loss covers the completion only (reasoning, tags and answer), not the prompt. Checkpoints go to
``<output_dir>/sft/``; the pipeline saves the final adapter to ``<output_dir>/sft/final``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from .arguments import sft_arguments
from .callbacks import MetricsWriter
from .phase import TrainingPhase


class SFTTrainingPipeline(TrainingPhase):
    name = "sft"

    def __init__(self, config: PipelineConfig, model: Any, tokenizer: Any, train_dataset: Any, backend: str,
                 metrics: MetricsWriter, callbacks: list[Any] | None = None) -> None:
        super().__init__(model, tokenizer, Path(config.output_dir) / "sft", metrics, callbacks)
        self.config, self.train_dataset, self.backend = config, train_dataset, backend

    def build_trainer(self) -> Any:
        from trl import SFTConfig, SFTTrainer  # after unsloth, when unsloth is the backend

        args = SFTConfig(**sft_arguments(self.config, self.output_dir, self.backend))
        return SFTTrainer(
            model=self.model, args=args, train_dataset=self.train_dataset, processing_class=self.tokenizer
        )
