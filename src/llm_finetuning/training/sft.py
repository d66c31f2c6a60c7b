"""Phase 1, SFT: teach the output format on prompt/completion conversations with TRL's SFTTrainer.

The loss covers the completion only (reasoning, tags and answer), not the prompt. Checkpoints go to
``<output_dir>/sft/``; the pipeline saves the final adapter to ``<output_dir>/sft/final``.
"""

from __future__ import annotations

import functools
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
        self.passed_through = config.sft_training.set_beyond_ours()

    def build_trainer(self) -> Any:
        from trl import SFTConfig, SFTTrainer  # after unsloth, when unsloth is the backend

        arguments = sft_arguments(self.config, self.output_dir, self.plan)
        args = SFTConfig(**{**arguments, **self.argument_overrides})
        return sft_trainer_class(SFTTrainer)(
            model=self.manager.model, args=args, train_dataset=self.train_dataset,
            processing_class=self.manager.tokenizer, share_prefix=self.plan.shares("sft"),
        )


@functools.cache
def sft_trainer_class(base: type) -> type:
    """Our SFT trainer over ``base`` (``trl.SFTTrainer`` as the backend imports it): built with ``share_prefix=``."""
    return type(f"Project{base.__name__}", (SharedPrefixLoss, base), {"__module__": __name__})


class SharedPrefixLoss:
    """SFT's loss pass with the batch's common prefix (the system prompt) computed once, where the plan says it is
    exact (``shared_prompt.py``); mixed in before an ``SFTTrainer`` class."""

    def __init__(self, *args: Any, share_prefix: bool, **kwargs: Any) -> None:
        self.share_prefix = share_prefix
        super().__init__(*args, **kwargs)

    def compute_loss(self, model: Any, inputs: dict, return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:  # fmt: skip
        if self.share_prefix and set(inputs) <= shared_prompt.SFT_INPUTS:
            model = shared_prompt.PrefixShared(model, self.accelerator)
        return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
