"""What the tools share beyond the library: their config flags, the trained weights a run left, model loading.

Every tool takes ``--config`` and ``--set SECTION.FIELD=VALUE`` like ``run_training.py`` (``cli.py``), loads the
model through ``ModelManager``, generates through ``generation`` and judges through ``evaluation``, so a tool
sees the model exactly as training and evaluation do.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..errors import ModelError

__all__ = ["config_from", "default_adapter", "load_model"]


def config_from(args: argparse.Namespace) -> PipelineConfig:
    """The tool's config: ``--config`` plus every ``--set``, validated."""
    return PipelineConfig.from_yaml(args.config, list(args.overrides))


def default_adapter(config: PipelineConfig, prefer_grpo: bool = True) -> Path:
    """The run's newest trained weights: the GRPO adapter (``save_path``) if it exists, else ``sft/final``."""
    sft_final, grpo = config.sft_adapter_path, config.grpo_adapter_path
    if prefer_grpo and grpo.is_dir():
        return grpo
    if sft_final.is_dir():
        return sft_final
    raise ModelError(
        f"no trained weights under {config.output_dir} (looked for {grpo} and {sft_final}); "
        "train first or pass --adapter PATH"
    )


def load_model(config: PipelineConfig, adapter: str | Path | None) -> Any:
    """A ``ModelManager`` in eval mode: base + ``adapter`` (a LoRA or full save), or the base model alone."""
    from ..model import ModelManager

    if adapter is not None:
        return ModelManager.load_for_inference(config, adapter)
    manager = ModelManager(config)
    manager.load()  # a fresh LoRA adapter is a no-op, so this is the base model's behaviour
    manager.model.eval()
    return manager
