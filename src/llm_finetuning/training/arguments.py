"""Config sections -> TRL's SFTConfig / GRPOConfig, in one place.

Every config field whose name is also a field of the TRL config class is copied as it is (our sections use
TRL's names on purpose), in one loop; what is ours alone, or computed, is set explicitly below with the
reason. Precision, device and activation checkpointing follow the hardware rules in ``model/hardware.py``,
never TRL's defaults: TRL 1.x turns bf16 and gradient checkpointing on by default, which fails or wastes time
on a CPU.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

from ..config import GRPOTrainingConfig, PipelineConfig, SFTTrainingConfig
from ..model.hardware import gradient_checkpointing, mixed_precision, on_cuda, unsloth_fast_inference

# Fields of our sections that TRL also has but that we decide ourselves (see grpo_arguments):
# evaluation runs in our own callback, use_vllm and max_completion_length are resolved from the backend and
# the data, and the vLLM engine settings only apply to TRL's own engine.
_DECIDED_HERE = frozenset({"eval_strategy", "eval_steps", "use_vllm", "max_completion_length", "vllm_mode",
                           "vllm_enable_sleep_mode", "vllm_gpu_memory_utilization"})


def same_named_fields(section: Any, trl_class: type) -> dict[str, Any]:
    """The section's values for every field TRL's config class has under the same name."""
    trl_fields = {field.name for field in dataclasses.fields(trl_class)}
    return {
        field.name: getattr(section, field.name)
        for field in dataclasses.fields(section)
        if field.name in trl_fields and field.name not in _DECIDED_HERE
    }


def common_arguments(
    config: PipelineConfig, section: SFTTrainingConfig | GRPOTrainingConfig, output_dir: Path, backend: str
) -> dict[str, Any]:
    """What both phases set beyond their section: output, checkpoints, seed, tracker, hardware."""
    # Unsloth applies its own activation checkpointing when it builds the LoRA model
    checkpointing = backend == "hf" and gradient_checkpointing(config.model)
    return {
        "output_dir": str(output_dir),
        "save_strategy": "steps",
        "seed": config.seed,
        "report_to": [] if config.report_to == "none" else [config.report_to],
        "gradient_checkpointing": checkpointing,
        "gradient_checkpointing_kwargs": {"use_reentrant": False} if checkpointing else None,
        "use_cpu": not on_cuda(),
        "eval_strategy": "no",  # our own evaluation callback generates and grades; see training/grpo.py
        **mixed_precision(config.model),
    }


def sft_arguments(config: PipelineConfig, output_dir: Path, backend: str) -> dict[str, Any]:
    from trl import SFTConfig

    section = config.sft_training
    return {
        **same_named_fields(section, SFTConfig),
        **common_arguments(config, section, output_dir, backend),
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
    return on_cuda() and importlib.util.find_spec("vllm") is not None


def rollouts_share_engine(config: PipelineConfig, backend: str) -> bool:
    """GRPO's rollouts run on a vLLM engine in this process that the run keeps (TRL's colocated one, hf backend)."""
    return backend == "hf" and vllm_wanted(config, backend) and config.grpo_training.vllm_mode == "colocate"


def grpo_arguments(
    config: PipelineConfig, output_dir: Path, backend: str, max_completion_length: int, reward_weights: list[float]
) -> dict[str, Any]:
    from trl import GRPOConfig

    section, sampling = config.grpo_training, config.vllm_sampling
    use_vllm = vllm_wanted(config, backend)
    arguments = {
        **same_named_fields(section, GRPOConfig),
        **common_arguments(config, section, output_dir, backend),
        "max_completion_length": max_completion_length,  # configured, or computed from the data
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": max(sampling.top_k, 0),  # ours: -1 = off; TRL: 0 = off
        "min_p": sampling.min_p or None,
        "reward_weights": reward_weights,
        "use_vllm": use_vllm,
        "log_completions": False,
    }
    if use_vllm and backend == "hf":  # TRL's own engine; Unsloth brings its engine with the model
        arguments.update(
            vllm_mode=section.vllm_mode,
            # a second full copy of the weights beside the training model: not Unsloth's shared-weight share
            vllm_gpu_memory_utilization=section.vllm_gpu_memory_utilization,
            vllm_max_model_length=config.model.max_seq_length,
            vllm_enable_sleep_mode=section.vllm_enable_sleep_mode,
        )
    return arguments
