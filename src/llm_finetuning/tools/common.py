"""What the tools share beyond the library: their config flags, the trained weights a run left, model loading.

Every tool takes ``--config`` and ``--set SECTION.FIELD=VALUE`` like ``run_training.py`` (``tools/train.py``), loads the
model through ``ModelManager``, generates through ``rollout`` and judges through ``evaluation``, so a tool
sees the model exactly as training and evaluation do. Tools that generate take ``--engine auto|hf|vllm``
(default: the config's ``evaluation.engine``); a tool loads a vLLM engine only when it generates on it, so
``export`` or ``--engine hf`` never reserves GPU memory for Unsloth's engine.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import PipelineConfig
from ..errors import ModelError
from ..session import Session
from ..session.checks import check_config

__all__ = ["add_engine_argument", "config_from", "default_adapter", "load_model", "open_session"]


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    """``--engine``: what a generating tool generates with (``evaluation.engine``)."""
    parser.add_argument(
        "--engine", choices=("auto", "hf", "vllm"),
        help="generation engine (default: the config's evaluation.engine; auto = vLLM on a GPU, and on a CPU "
             "where vLLM is installed and the model has 50M parameters or more; else hf)",
    )  # fmt: skip


def config_from(args: argparse.Namespace) -> PipelineConfig:
    """The tool's config: ``--config`` plus every ``--set`` (and ``--engine``), validated; the console set up
    as a run's is (``--verbose``: the libraries' own output too)."""
    from ..grading import use_grader
    from ..runtime.logging_setup import setup_logging

    overrides = list(args.overrides)
    if getattr(args, "engine", None):
        overrides.append(f"evaluation.engine={args.engine}")
    config = check_config(PipelineConfig.from_yaml(args.config, overrides))
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


def open_session(config: PipelineConfig, *, generates: bool = False) -> Session:
    """The tool's session, before its model loads: the backend's libraries imported first and quieted (call it
    before data loads: no library progress bars). Unsloth's vLLM engine, built with the model, is kept only for a
    tool that ``generates`` on it: any other tool's session sets the run's engine choice, ``use_vllm``, to false."""
    if generates and config.evaluation.engine != "hf":
        return Session.open(config)
    return Session.open(config.with_overrides(["grpo_training.use_vllm=false"]))


def load_model(config: PipelineConfig, adapter: str | Path | None, *, generates: bool = False,
               session: Session | None = None) -> Session:  # fmt: skip
    """The tool's session (``session``, or one opened here) with the model in eval mode: base + ``adapter`` (a
    LoRA or full save), or the base model alone; ``.manager``, ``.engine`` when the tool ``generates`` (through
    ``evaluation.engine``), then ``.free()``."""
    session = session or open_session(config, generates=generates)
    session.load(adapter)
    if adapter is None:
        session.manager.model.eval()  # a fresh LoRA adapter is a no-op, so this is the base model's behaviour
    if generates:
        session.open_engine()
    return session
