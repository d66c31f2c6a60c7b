"""Config sections -> TRL's SFTConfig / GRPOConfig, in one place.

Both phases share ``common_arguments`` (schedule, batch, checkpoints, precision, device); each phase adds its
own fields. Precision and device follow the hardware, never TRL's defaults: TRL 1.x turns bf16 and gradient
checkpointing on by default, which fails or wastes time on a CPU.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import torch

from ..config import GRPOTrainingConfig, PipelineConfig, SFTTrainingConfig
from ..model.backends import unsloth_fast_inference


def precision(config: PipelineConfig) -> dict[str, bool]:
    """bf16 on a CUDA GPU that has it (unless dtype says otherwise), fp16 on older GPUs, fp32 on CPU."""
    if not torch.cuda.is_available() or config.model.dtype == "float32":
        return {"bf16": False, "fp16": False}
    bf16_ok = torch.cuda.is_bf16_supported()
    want_bf16 = config.model.dtype == "bfloat16" or (config.model.dtype == "auto" and bf16_ok)
    return {"bf16": want_bf16, "fp16": not want_bf16}


def common_arguments(
    config: PipelineConfig, section: SFTTrainingConfig | GRPOTrainingConfig, output_dir: Path, backend: str
) -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    # Unsloth applies its own gradient checkpointing when it builds the LoRA model
    checkpointing = cuda and backend == "hf" and config.model.gradient_checkpointing
    return {
        "output_dir": str(output_dir),
        "max_steps": section.max_steps,
        "per_device_train_batch_size": section.per_device_train_batch_size,
        "gradient_accumulation_steps": section.gradient_accumulation_steps,
        "learning_rate": section.learning_rate,
        "warmup_steps": section.warmup_steps,
        "lr_scheduler_type": section.lr_scheduler_type,
        "weight_decay": section.weight_decay,
        "optim": section.optim,
        "max_grad_norm": section.max_grad_norm,
        "logging_steps": section.logging_steps,
        "save_strategy": "steps",
        "save_steps": section.save_steps,
        "save_total_limit": section.save_total_limit,
        "seed": config.seed,
        "report_to": [] if config.report_to == "none" else [config.report_to],
        "gradient_checkpointing": checkpointing,
        "gradient_checkpointing_kwargs": {"use_reentrant": False} if checkpointing else None,
        "use_cpu": not cuda,
        "eval_strategy": "no",  # our own evaluation callback generates and grades; see training/grpo_trainer.py
        **precision(config),
    }


def sft_arguments(config: PipelineConfig, output_dir: Path, backend: str) -> dict[str, Any]:
    section = config.sft_training
    return {
        **common_arguments(config, section, output_dir, backend),
        "num_train_epochs": section.num_train_epochs,
        "max_length": config.model.max_seq_length,
        "completion_only_loss": True,  # learn the answer format, not to echo the prompt
        "packing": False,
        "dataset_num_proc": config.data.num_proc,
    }


def vllm_wanted(config: PipelineConfig, backend: str) -> bool:
    """Use vLLM for GRPO generation: as configured, else whenever the backend can."""
    if config.grpo_training.use_vllm is not None:
        return config.grpo_training.use_vllm
    if backend == "unsloth":
        return unsloth_fast_inference(config.model)
    return torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


def grpo_arguments(
    config: PipelineConfig, output_dir: Path, backend: str, max_completion_length: int, reward_weights: list[float]
) -> dict[str, Any]:
    section, sampling = config.grpo_training, config.vllm_sampling
    use_vllm = vllm_wanted(config, backend)
    arguments = {
        **common_arguments(config, section, output_dir, backend),
        "num_generations": section.num_generations,
        "max_completion_length": max_completion_length,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": max(sampling.top_k, 0),
        "min_p": sampling.min_p or None,
        "loss_type": section.loss_type,
        "importance_sampling_level": section.importance_sampling_level,
        "beta": section.beta,
        "epsilon": section.epsilon,
        "epsilon_high": section.epsilon_high,
        "scale_rewards": section.scale_rewards,
        "mask_truncated_completions": section.mask_truncated_completions,
        "reward_weights": reward_weights,
        "use_vllm": use_vllm,
        "log_completions": False,
    }
    if use_vllm and backend == "hf":
        arguments.update(
            vllm_mode=section.vllm_mode,
            vllm_gpu_memory_utilization=config.model.gpu_memory_utilization,
            vllm_enable_sleep_mode=section.vllm_enable_sleep_mode,
        )
    return arguments
