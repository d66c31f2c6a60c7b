"""The hardware rules every layer must agree on, in one place: weight dtype, mixed precision, activation
checkpointing, the optimizer, whether vLLM pays off and its device arguments, and giving memory back (what the
machine has is probed by ``runtime/hardware.py``).

Loading (model/), the trainers' arguments (training/arguments.py), the memory estimate and the phases' memory
handover all ask here, so the model's weights and the trainer's flags cannot disagree, and both backends train
alike. The rules follow what Unsloth does on its own (its compiled trainer and CPU mode rewrite these settings
when they are left to it), so the hf backend, given the same config, trains the same way:

- Activation checkpointing as configured (a phase's own setting, else the model's), on every device: on a CPU it
  trades step time for RAM as it does for GPU memory on a GPU (SmolLM2-135M's GRPO: peak 9.1 -> 6.1 GiB, steps
  13 % longer, the same losses and gradients; its SFT: 1.5x slower for a peak that was never the run's;
  docs/benchmarks.md).
- CPU: fused AdamW (Unsloth's CPU mode swaps ``adamw_torch`` and the GPU-only 8-bit/paged optimizers for it).
  ``dtype: auto`` with LoRA on a CPU that computes bf16 natively (avx512_bf16 or AMX) trains bf16 base weights
  under bf16 autocast, the adapters in fp32: 1.6x the tokens/s of fp32 on SmolLM2-135M (docs/benchmarks.md);
  everything else is fp32 without autocast (full fine-tuning in bf16 would lose small updates; an explicit
  float32 stays float32).
- CUDA: weights in bf16 where the GPU has it (fp16 on older GPUs for LoRA; full fine-tuning there keeps fp32
  master weights); training autocasts to bf16 (fp16 without bf16), fp32 weights included; full fine-tuning of
  bf16 weights trains them directly, without autocast. 8-bit optimizers need bitsandbytes.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
from dataclasses import dataclass

import torch

from ..config import ConfigError, ModelConfig
from ..runtime.heap import trim_heap

__all__ = ["CPU_VLLM_MIN_PARAMETERS", "Precision", "cpu_computes_bf16", "free_memory", "gradient_checkpointing",
           "on_cuda", "optimizer", "vllm_pays_off"]  # fmt: skip

logger = logging.getLogger(__name__)

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
# Optimizers with CUDA kernels only (bitsandbytes); Unsloth's CPU mode replaces them by fused AdamW.
_GPU_ONLY_OPTIMIZER_TAGS = ("8bit", "paged", "bnb")
_CPU_ADAMW = "adamw_torch_fused"  # fused AdamW has CPU kernels (torch >= 2.4)
# On a CPU a vLLM engine (8 s to start, 20-28 s with vLLM's import) pays for itself where generation is most of
# the work. Measured on 2 cores: the 0.8M-parameter demo model generated 3x faster on vLLM, but its GRPO steps
# took 0.25 s either way; SmolLM2-135M generated 4.5x faster (581 against 129 tokens/s, bf16), and generation
# was most of its GRPO step (docs/benchmarks.md).
CPU_VLLM_MIN_PARAMETERS = 50_000_000


def on_cuda() -> bool:
    """Whether this process trains on a CUDA GPU."""
    return torch.cuda.is_available()


def cpu_computes_bf16() -> bool:
    """Whether this CPU has bf16 arithmetic in hardware (AVX512-BF16 or AMX), where bf16 matmuls run fast."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, check, lambda: False)() for check in checks)


@dataclass(frozen=True)
class Precision:
    """The weights' dtype and the trainers' autocast, and why: decided once per run (``RunPlan.precision``) and
    read by everything that loads the model, starts an engine or builds a trainer."""

    weights: torch.dtype
    bf16: bool  # the trainers' autocast flags
    fp16: bool
    reason: str

    @classmethod
    def resolve(cls, model_config: ModelConfig, cuda: bool) -> Precision:
        """``model.dtype`` on this device (``cuda``: a CUDA GPU, else the CPU); ``auto``: bf16 on a CUDA GPU that
        has it (fp16 on older GPUs for LoRA), bf16 for LoRA on a CPU that computes bf16, else fp32."""
        lora, bf16_gpu = model_config.uses_lora, cuda and torch.cuda.is_bf16_supported()
        if model_config.dtype != "auto":
            weights, reason = _DTYPES[model_config.dtype], f"model.dtype: {model_config.dtype} was asked for"
        elif cuda:
            # fp16 weights cannot hold trainable full-fine-tuning parameters under AMP; LoRA keeps adapters in fp32
            weights = torch.bfloat16 if bf16_gpu else torch.float16 if lora else torch.float32
            reason = "auto: the GPU's 16-bit type" + ("" if weights != torch.float32 else
                                                      ", fp32 master weights for full fine-tuning")  # fmt: skip
        elif lora and cpu_computes_bf16():
            weights, reason = torch.bfloat16, ("auto: this CPU computes bf16 natively; LoRA trains on bf16 "
                                               "weights, its adapters in fp32")  # fmt: skip
        else:
            weights = torch.float32
            reason = ("auto: full fine-tuning on a CPU keeps fp32 weights (bf16 would lose small updates)" if not lora
                      else "auto: this CPU has no native bf16 arithmetic, so fp32")  # fmt: skip
        if not cuda:  # autocast where fp32 adapters meet bf16 weights; fp32 stays fp32
            bf16, fp16 = weights == torch.bfloat16 and lora, False
        elif weights == torch.bfloat16 and not lora:
            bf16, fp16 = False, False  # bf16 full fine-tuning updates the bf16 weights directly
        else:
            bf16 = bf16_gpu and weights != torch.float16
            fp16 = not bf16
        return cls(weights, bf16, fp16, reason)

    @property
    def weights_name(self) -> str:
        """The weights' dtype as vLLM and ``summary.json`` name it (``bfloat16``)."""
        return str(self.weights).removeprefix("torch.")

    def record(self) -> dict[str, str | None]:
        """``summary.json``'s ``precision``."""
        autocast = "bf16" if self.bf16 else "fp16" if self.fp16 else None
        return {"weights": self.weights_name, "autocast": autocast, "reason": self.reason}


def vllm_pays_off(parameters: int | None, cuda: bool) -> tuple[bool, str]:
    """Whether generating on vLLM (where it loads) beats ``model.generate`` for a model of ``parameters``
    (None: unknown offline, a real model) on a CUDA GPU (``cuda``) or a CPU, and why."""
    if cuda:
        return True, "vLLM on a CUDA GPU"
    size = "a model of unknown size" if parameters is None else f"{parameters / 1e6:.1f}M parameters"
    if parameters is not None and parameters < CPU_VLLM_MIN_PARAMETERS:
        return False, (f"on a CPU vLLM's engine start costs more than it saves for {size} (it pays off from "
                       f"{CPU_VLLM_MIN_PARAMETERS // 1_000_000}M)")  # fmt: skip
    return True, f"on a CPU vLLM generates 4x faster than model.generate for {size}"


def cuda_devices() -> list[int]:
    """The CUDA device whose random generator a ``torch.random.fork_rng`` must save too ([] on a CPU)."""
    return [torch.cuda.current_device()] if on_cuda() else []


# vLLM's CPU build allocates the KV cache it is told to (unset: a share of the free RAM). With 32-token blocks, 256 MiB
# ran SmolLM2's 400-problem evaluation as fast as 1 GiB in one measurement and 10-15 % slower in another; with
# 128-token blocks it had cost 15-20 % (each sequence then held 256 token slots for ~150 tokens). An evaluation
# call now runs only as many requests as the cache holds (rollout/admission.py), which recovered most of that
# without the memory: docs/benchmarks.md. The user's VLLM_CPU_KVCACHE_SPACE (whole GiB) overrides this in vLLM.
CPU_KV_CACHE_BYTES = 256 * 2**20
CPU_KV_CACHE_SEQUENCES = 4  # and never room for fewer sequences of the engine's full length than this


def vllm_kv_cache_arguments(model_path: str, max_model_len: int, dtype: str) -> dict[str, int]:
    """``vllm.LLM`` keywords sizing its KV cache: on a CPU ``CPU_KV_CACHE_BYTES``, or ``CPU_KV_CACHE_SEQUENCES``
    sequences of ``max_model_len`` tokens of the model at ``model_path`` in ``dtype`` where that is more; nothing
    on a GPU (vLLM sizes it from grpo_training.vllm_gpu_memory_utilization)."""
    if on_cuda():
        return {}
    per_token = kv_bytes_per_token(model_path, getattr(torch, dtype).itemsize)
    return {"kv_cache_memory_bytes": max(CPU_KV_CACHE_BYTES, CPU_KV_CACHE_SEQUENCES * max_model_len * per_token)}


def kv_bytes_per_token(model_path: str, element_size: int) -> int:
    """Keys and values of one token in every attention layer of the model at ``model_path`` (0 where its config
    does not say)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path).get_text_config()
    layers, heads = getattr(config, "num_hidden_layers", 0), getattr(config, "num_attention_heads", 0)
    if not (layers and heads):
        return 0
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * layers * kv_heads * head_dim * element_size


CPU_KV_BLOCK_TOKENS = 32  # vLLM's CPU attention takes multiples of 32


def vllm_device_arguments(sleep_mode: bool) -> dict[str, bool | int | None]:
    """``vllm.LLM`` keywords that depend on the device (``sleep_mode``: asked for by the config)."""
    return {
        "enable_sleep_mode": sleep_mode and on_cuda(),
        "enforce_eager": not on_cuda(),  # compiling on a CPU takes longer than the generation it speeds up
        # vLLM's CPU build cannot rewind a seeded request's generator after a partial (chunked) prefill
        # ("CPU Generator does not use offset"): prompts are prefilled whole there
        "enable_chunked_prefill": on_cuda(),
        # vLLM caches a prompt's KV only in whole blocks, and its CPU build's blocks are 128 tokens: no prompt shorter
        # than that was ever reused. At 32 (the least its CPU attention takes) the system prompt and the question's
        # opening words are computed once for all prompts and a sample's prompt once for all its draws: evaluation
        # of SmolLM2 on 400 problems 1.9x faster (docs/benchmarks.md). None: vLLM's own (16 on a GPU)
        "block_size": None if on_cuda() else CPU_KV_BLOCK_TOKENS,
    }


def gradient_checkpointing(model_config: ModelConfig, phase_setting: bool | None = None) -> bool:
    """Whether activations are checkpointed: as configured (a phase's own ``phase_setting`` first, else the
    model's), on a GPU and on a CPU alike."""
    return model_config.gradient_checkpointing if phase_setting is None else phase_setting


def optimizer(name: str, setting: str) -> str:
    """The transformers optimizer the trainer gets for the configured ``name`` (``setting`` names the field).

    On a CPU: fused AdamW for ``adamw_torch`` and for the GPU-only 8-bit/paged optimizers (with a notice), as
    Unsloth's CPU mode does, so both backends train alike. On CUDA an 8-bit optimizer without bitsandbytes is
    refused up front, before hours of loading (transformers would raise only when the trainer is built).
    """
    gpu_only = any(tag in name for tag in _GPU_ONLY_OPTIMIZER_TAGS)
    if on_cuda():
        if gpu_only and importlib.util.find_spec("bitsandbytes") is None:
            raise ConfigError(
                f"{setting}: {name} needs bitsandbytes, which is not installed; install the gpu extra "
                f"(uv sync --extra gpu) or set {setting}=adamw_torch"
            )
        return name
    if gpu_only:
        logger.info("%s: %s has no CPU kernels; training on the CPU with %s", setting, name, _CPU_ADAMW)
        return _CPU_ADAMW
    return _CPU_ADAMW if name == "adamw_torch" else name


def empty_cuda_cache() -> None:
    """Give cached CUDA memory back (nothing on a CPU)."""
    if on_cuda():
        torch.cuda.empty_cache()


def free_memory() -> None:
    """Collect garbage, give cached CUDA memory back (vLLM needs it for its KV cache) and the C heap's free pages
    to the system (``runtime.heap.trim_heap``)."""
    gc.collect()
    empty_cuda_cache()
    trim_heap()
