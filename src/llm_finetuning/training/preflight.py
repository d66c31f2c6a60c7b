"""Fail fast, not after hours: one step of each phase on its worst case before the real run.

GRPO runs out of GPU memory when its longest prompts meet completions that run to ``max_completion_length``,
which may first happen a hundred steps in. The preflight trains one SFT micro-batch of the longest SFT
examples and one GRPO step on the longest prompts with every completion forced to the full
``max_completion_length``, before anything else; an out-of-memory error there stops the run with one line
naming the first setting to change (the estimate of ``model/memory.py``). On by default on CUDA
(``run_training.py --preflight`` / ``--no-preflight``).

The steps run in throwaway trainers at learning rate 0, so no weight moves and no optimizer state survives;
the random number generators are restored afterwards, so a run with the preflight trains exactly as one
without it.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import PipelineConfig
from ..data import GRPOData
from ..errors import PipelineError
from ..model import ModelManager
from ..model.hardware import free_memory
from ..rollout import EngineOwner
from ..session.plan import RunPlan
from . import trl_compat
from .callbacks import TrainingProgress
from .phase import release

__all__ = ["PreflightStep", "grpo_lengths", "longest_rows", "run_preflight", "sft_lengths"]

logger = logging.getLogger(__name__)

_Probed = tuple[int, int, dict[str, float]]  # rows in the probe batch, the longest in tokens, what was logged

# What turns a phase's trainer into a one-step probe: no update, no checkpoint, no log.
_PROBE = {"max_steps": 1, "learning_rate": 0.0, "warmup_steps": 0, "save_strategy": "no", "report_to": [],
          "logging_steps": 1}  # fmt: skip


@dataclass(frozen=True)
class PreflightStep:
    phase: str
    rows: int  # examples (SFT) or prompts (GRPO) in the probe batch
    longest_tokens: int  # the longest of them, in tokens (GRPO: prompt + forced completion)
    seconds: float
    peak_gib: float | None  # peak CUDA memory of the step (None on a CPU)
    logged: dict[str, float]  # what the trainer logged of its one step (GRPO: completions/mean_length, ...)


def sft_lengths(dataset: Any, tokenizer: Any) -> list[int]:
    """Tokens of each SFT conversation (prompt + completion) as the trainer renders it."""
    conversations = [p + c for p, c in zip(dataset["prompt"], dataset["completion"])]
    return [len(ids) for ids in tokenizer.apply_chat_template(conversations, tokenize=True, return_dict=False)]


def grpo_lengths(dataset: Any, tokenizer: Any) -> list[int]:
    """Tokens of each GRPO prompt with the generation prompt, as GRPO renders it."""
    rendered = tokenizer.apply_chat_template(list(dataset["prompt"]), tokenize=True, add_generation_prompt=True,
                                             return_dict=False)  # fmt: skip
    return [len(ids) for ids in rendered]


def longest_rows(dataset: Any, lengths: list[int], count: int) -> Any:
    """The ``count`` longest rows (ties: the earlier row), longest first."""
    order = sorted(range(len(lengths)), key=lambda index: (-lengths[index], index))
    return dataset.select(order[:count])


def run_preflight(config: PipelineConfig, plan: RunPlan, manager: ModelManager, engines: EngineOwner,
                  sft_data: Any | None, grpo_data: GRPOData | None, reward_funcs: list[Any],
                  reward_weights: list[float]) -> list[PreflightStep]:  # fmt: skip
    """One SFT step and/or one GRPO step on the worst case; a ``PipelineError`` naming what to lower on OOM."""
    steps = []
    with _restored_random_state(plan.cuda), _scratch(Path(config.output_dir) / ".preflight") as scratch:
        if sft_data is not None:
            steps.append(_probe("sft", config, plan.cuda, lambda: _sft_probe(config, plan, manager, sft_data, scratch)))
        if grpo_data is not None:
            steps.append(_probe("grpo", config, plan.cuda, lambda: _grpo_probe(config, plan, manager, engines, grpo_data,
                                                                   reward_funcs, reward_weights, scratch)))  # fmt: skip
    for step in steps:
        peak = f", peak {step.peak_gib:.1f} GiB" if step.peak_gib is not None else ""
        logger.info("preflight %s: one step on the %d longest (up to %d tokens) in %.1fs%s",
                    step.phase, step.rows, step.longest_tokens, step.seconds, peak)  # fmt: skip
    return steps


def _sft_probe(config: PipelineConfig, plan: RunPlan, manager: ModelManager, dataset: Any, scratch: Path) -> _Probed:
    from .sft import SFTPhase

    batch = config.sft_training.per_device_train_batch_size
    lengths = sft_lengths(dataset, manager.tokenizer)
    worst = longest_rows(dataset, lengths, batch)
    phase = SFTPhase(config, plan, manager, worst, metrics=None)
    phase.argument_overrides = {**_PROBE, "output_dir": str(scratch / "sft"), "gradient_accumulation_steps": 1}
    return len(worst), max(lengths), _train_once(phase)


def _grpo_probe(config: PipelineConfig, plan: RunPlan, manager: ModelManager, engines: EngineOwner, data: GRPOData,
                reward_funcs: list[Any], reward_weights: list[float], scratch: Path) -> _Probed:  # fmt: skip
    from .grpo import GRPOPhase

    grpo = config.grpo_training
    prompts = grpo.per_device_train_batch_size * grpo.gradient_accumulation_steps // grpo.num_generations
    lengths = grpo_lengths(data.train, manager.tokenizer)
    worst = replace(data, train=longest_rows(data.train, lengths, max(prompts, 1)))
    budget = data.max_completion_length
    # completions may not stop early: every one runs to the budget, as the longest completions eventually will
    forced = {"min_tokens": budget} if plan.uses_vllm else {"min_new_tokens": budget}
    phase = GRPOPhase(config, plan, manager, engines, worst, reward_funcs, reward_weights, metrics=None)
    phase.argument_overrides = {**_PROBE, "output_dir": str(scratch / "grpo"), "generation_kwargs": forced}
    return len(worst.train), max(lengths) + budget, _train_once(phase)


def _train_once(phase: Any) -> dict[str, float]:
    trl_compat.install(phase.plan.cuda)
    trainer = phase.build_trainer()
    TrainingProgress.take_over(trainer)  # a probe step prints no bar and no log line
    try:
        trainer.train()
        return {key: value for record in trainer.state.log_history for key, value in record.items()
                if isinstance(value, (int, float))}  # fmt: skip
    finally:
        release(trainer)
        del trainer
        free_memory()


def _probe(name: str, config: PipelineConfig, cuda: bool, body: Any) -> PreflightStep:
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    try:
        rows, longest, logged = body()
    except torch.OutOfMemoryError:
        free_memory()
        raise PipelineError(_out_of_memory(name, config, cuda)) from None
    peak = torch.cuda.max_memory_allocated() / 1024**3 if cuda else None
    return PreflightStep(name, rows, longest, round(time.perf_counter() - started, 2), peak, logged)


def _out_of_memory(phase: str, config: PipelineConfig, cuda: bool) -> str:
    """One line: where it ran out, and the first setting to change (from the memory estimate when it has one)."""
    from ..model.memory import estimate_memory

    what = "the longest SFT examples" if phase == "sft" else "the longest prompts with full-length completions"
    suggestion = None
    with contextlib.suppress(PipelineError):
        total = torch.cuda.get_device_properties(0).total_memory if cuda else 0
        suggestion = estimate_memory(config, total).suggestion if total else None
    section = "sft_training" if phase == "sft" else "grpo_training"
    fallback = (f"--set {section}.per_device_train_batch_size (raise gradient_accumulation_steps to keep the batch), "
                "model.max_seq_length or grpo_training.vllm_gpu_memory_utilization")  # fmt: skip
    return (f"preflight: CUDA out of memory in one {phase.upper()} step on {what}; lower "
            f"{suggestion or fallback} (run_training.py --no-preflight skips this check)")


@contextlib.contextmanager
def _restored_random_state(cuda: bool) -> Iterator[None]:
    """Every generator the trainers seed or draw from, as it was (the real run then trains as without us)."""
    python, numpy_state, cpu = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if cuda else None
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy_state)
        torch.set_rng_state(cpu)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


@contextlib.contextmanager
def _scratch(path: Path) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
