"""The hardware rules every layer must agree on, in one place: weight dtype, mixed precision, activation
checkpointing, and giving memory back.

Loading (model/), the trainers' arguments (training/arguments.py) and the phases' memory handover all ask
here, so the model's weights and the trainer's precision flags cannot disagree. The rules: on a CPU everything
is fp32 and activation checkpointing stays off (it only trades compute for GPU memory); on a CUDA GPU the
weights are bf16 where the GPU supports it, fp16 on older GPUs for LoRA (full fine-tuning keeps fp32 master
weights and trains under fp16 autocast).
"""

from __future__ import annotations

import gc

import torch

from ..config import ModelConfig

__all__ = ["free_memory", "gradient_checkpointing", "mixed_precision", "on_cuda", "resolve_dtype", "unsloth_fast_inference"]

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def on_cuda() -> bool:
    """Whether this process trains on a CUDA GPU."""
    return torch.cuda.is_available()


def resolve_dtype(model_config: ModelConfig) -> torch.dtype:
    """``model.dtype`` as a torch dtype; ``auto`` = bf16 on a CUDA GPU that has it, fp16 on older GPUs, else fp32."""
    if model_config.dtype != "auto":
        return _DTYPES[model_config.dtype]
    if not on_cuda():
        return torch.float32
    if torch.cuda.is_bf16_supported():
        return torch.bfloat16
    # fp16 weights cannot hold trainable full-fine-tuning parameters under AMP; LoRA keeps adapters in fp32.
    return torch.float16 if model_config.uses_lora else torch.float32


def mixed_precision(model_config: ModelConfig) -> dict[str, bool]:
    """The trainers' ``bf16``/``fp16`` flags: bf16 on a CUDA GPU that has it, fp16 on older GPUs, none on CPU."""
    if not on_cuda() or model_config.dtype == "float32":
        return {"bf16": False, "fp16": False}
    bf16_ok = torch.cuda.is_bf16_supported()
    want_bf16 = model_config.dtype == "bfloat16" or (model_config.dtype == "auto" and bf16_ok)
    return {"bf16": want_bf16, "fp16": not want_bf16}


def gradient_checkpointing(model_config: ModelConfig) -> bool:
    """Whether activations are checkpointed: as configured on a CUDA GPU, never on a CPU."""
    return model_config.gradient_checkpointing and on_cuda()


def unsloth_fast_inference(model_config: ModelConfig) -> bool:
    """Whether the Unsloth backend starts its vLLM engine: as configured, never without CUDA (CPU mode has none)."""
    return model_config.fast_inference and on_cuda()


def free_memory() -> None:
    """Collect garbage and give cached CUDA memory back (vLLM needs it for its KV cache)."""
    gc.collect()
    if on_cuda():
        torch.cuda.empty_cache()
