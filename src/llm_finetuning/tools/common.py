"""What the tools share beyond the library: their config flags, the trained weights a run left, model loading.

Every tool takes ``--config`` and ``--set SECTION.FIELD=VALUE`` like ``run_training.py`` (``tools/train.py``), loads the
model through ``ModelManager``, generates through ``generation`` and judges through ``evaluation``, so a tool
sees the model exactly as training and evaluation do. Tools that generate take ``--engine auto|hf|vllm``
(default: the config's ``evaluation.engine``); a tool loads a vLLM engine only when it generates on it, so
``export`` or ``--engine hf`` never reserves GPU memory for Unsloth's engine.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..errors import ModelError

__all__ = ["LoadedModel", "add_engine_argument", "config_from", "default_adapter", "load_model",
           "prepare_libraries"]  # fmt: skip


@dataclass
class LoadedModel:
    """A tool's model in eval mode, what it generates with (None for a tool that does not generate), and the
    owner of any vLLM engine; ``free`` ends the engine, then drops the model."""

    manager: Any  # ModelManager
    engines: Any  # vllm_engine.EngineOwner
    engine: Any = None  # generation.engines, when the tool generates
    engine_reason: str | None = None

    @property
    def config(self) -> PipelineConfig:
        return self.manager.config

    def free(self) -> None:
        self.engines.shutdown()
        self.manager.free()


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    """``--engine``: what a generating tool generates with (``evaluation.engine``)."""
    parser.add_argument(
        "--engine", choices=("auto", "hf", "vllm"),
        help="generation engine (default: the config's evaluation.engine; auto = hf on a CPU)",
    )  # fmt: skip


def config_from(args: argparse.Namespace) -> PipelineConfig:
    """The tool's config: ``--config`` plus every ``--set`` (and ``--engine``), validated; the console set up
    as a run's is (``--verbose``: the libraries' own output too)."""
    from ..grading import use_grader
    from ..runtime.logging_setup import setup_logging

    overrides = list(args.overrides)
    if getattr(args, "engine", None):
        overrides.append(f"evaluation.engine={args.engine}")
    config = PipelineConfig.from_yaml(args.config, overrides)
    setup_logging(config.log_level, verbose=getattr(args, "verbose", False))
    use_grader(config.grader)
    return config


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


def prepare_libraries(config: PipelineConfig) -> Any:
    """The config's backend, its libraries imported first (Unsloth before transformers), then the libraries'
    own progress bars and messages turned off (``--verbose`` keeps them). Call it before data or models load."""
    from ..model import choose_backend
    from ..runtime.logging_setup import quiet_libraries

    backend = choose_backend(config.model)
    backend.prepare()
    quiet_libraries()
    return backend


def load_model(config: PipelineConfig, adapter: str | Path | None, *, generates: bool = False) -> LoadedModel:
    """The model in eval mode: base + ``adapter`` (a LoRA or full save), or the base model alone.

    ``generates``: the tool generates, through ``.engine`` (``evaluation.engine``). Unsloth's vLLM engine
    (``model.fast_inference``) is loaded only for a tool that generates on it.
    """
    from ..generation import open_engine
    from ..model import ModelManager
    from ..vllm_engine import EngineOwner

    engine_wanted = generates and config.evaluation.engine != "hf" and config.model.fast_inference
    config = config.with_overrides([f"model.fast_inference={str(engine_wanted).lower()}"])
    backend = prepare_libraries(config)
    if adapter is not None:
        manager = ModelManager.load_for_inference(config, adapter, backend)
    else:
        manager = ModelManager(config, backend)
        manager.load()  # a fresh LoRA adapter is a no-op, so this is the base model's behaviour
        manager.model.eval()
    loaded = LoadedModel(manager, EngineOwner(config))
    if (carried := backend.model_engine(manager.model)) is not None:
        loaded.engines.adopt(carried, "unsloth")
    if generates:
        loaded.engine, loaded.engine_reason = open_engine(config.evaluation.engine, manager, loaded.engines)
    return loaded
