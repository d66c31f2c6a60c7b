"""Will this config fit my GPU? An estimate of the memory each phase needs, and the first setting to change.

Pure arithmetic over the config: no torch, no GPU. The model's shape comes from its ``config.json`` (a local
directory), from the tiny demo model's settings, or from ``KNOWN_SHAPES`` (the default model); the formula is
written out in docs/gpu.md ("Will it fit?"). It errs high: it counts full fp32 logits where Unsloth and TRL
chunk the loss, and Unsloth's offloaded gradient checkpointing as if it stayed on the GPU.

    >>> from llm_finetuning.config import PipelineConfig
    >>> estimate = estimate_memory(PipelineConfig.from_yaml("configs/default_config.yaml"), parse_size("24GiB"))
    >>> estimate.fits, estimate.suggestion                                                 # doctest: +SKIP
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..config import ConfigError, PipelineConfig
from .backend import Backend
from .backends import backend_on_cuda
from .shape import KNOWN_SHAPES, ModelShape, model_shape

__all__ = ["KNOWN_SHAPES", "MemoryEstimate", "ModelShape", "PhaseEstimate", "estimate_memory", "model_shape",
           "parse_size"]  # fmt: skip

GIB = 1024**3
CUDA_OVERHEAD = 1 * GIB  # CUDA context, cuBLAS workspaces and allocator slack, measured by nobody here: a margin
_UNITS = {"": GIB, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 1024, "mib": 1024**2,
          "gib": GIB, "tib": 1024**4}  # fmt: skip


def parse_size(text: str) -> int:
    """``"24GiB"``, ``"80 GB"``, ``"16"`` (GiB) -> bytes; ConfigError naming the accepted forms otherwise."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ConfigError(f"--gpu-memory {text!r}: give a size such as 24GiB, 80GB or 16 (GiB)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


@dataclass(frozen=True)
class PhaseEstimate:
    phase: str  # "sft" or "grpo"
    parts: dict[str, int]  # bytes by component, see docs/gpu.md

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@dataclass(frozen=True)
class MemoryEstimate:
    gpu_bytes: int
    backend: str
    phases: tuple[PhaseEstimate, ...]
    engine_shortfall: int  # bytes the vLLM engine's share lacks for its weights and one generation batch
    suggestion: str | None  # the first setting to change (``--set`` overrides), None when it fits

    @property
    def fits(self) -> bool:
        return self.engine_shortfall <= 0 and all(p.total <= self.gpu_bytes for p in self.phases)

    def lines(self) -> list[str]:
        """One line per phase, then the verdict: what check.py prints."""
        out = [f"{p.phase}: {p.total / GIB:.1f} GiB of {self.gpu_bytes / GIB:.1f} GiB ("
               + ", ".join(f"{k} {v / GIB:.1f}" for k, v in p.parts.items() if v) + ")" for p in self.phases]  # fmt: skip
        if self.engine_shortfall > 0:
            out.append(f"the vLLM engine's share is {self.engine_shortfall / GIB:.1f} GiB short of weights + KV cache")
        out.append("fits" if self.fits else f"does not fit; first change: {self.suggestion or 'a larger GPU'}")
        return out


def estimate_memory(config: PipelineConfig, gpu_bytes: int, backend: Backend | None = None) -> MemoryEstimate:
    """Memory per phase on a GPU of ``gpu_bytes``, and the first ``--set`` that makes it fit (when it does not)."""
    backend = backend or backend_on_cuda(config)
    phases, shortfall = _phases(config, gpu_bytes, backend)
    estimate = MemoryEstimate(gpu_bytes, backend.name, phases, shortfall, None)
    if estimate.fits:
        return estimate
    return MemoryEstimate(gpu_bytes, backend.name, phases, shortfall, _first_change(config, gpu_bytes, backend))


# Every vLLM engine beside training is sized by this one field (null: the engine's own default share).
ENGINE_SHARE_SETTING = "grpo_training.vllm_gpu_memory_utilization"


@dataclass(frozen=True)
class _Engine:
    """A vLLM engine beside training on a CUDA GPU."""

    holds_training_weights: bool  # it shares the trained weights (Unsloth's), rather than holding a copy


def _engine(config: PipelineConfig, backend: Backend) -> _Engine | None:
    """GRPO's rollout engine when there is one; else the engine of ours that GRPO's periodic evaluations keep
    (the run shuts an evaluation engine down after each evaluation outside GRPO, so SFT never holds one)."""
    if backend.engine_wanted_on_cuda(config):
        return _Engine(backend.engine_holds_training_weights)
    evaluation = config.evaluation
    evaluates_on_vllm = evaluation.engine != "hf" and backend.vllm_refusal(config.model) is None  # auto: vLLM on CUDA
    if evaluation.enabled and evaluation.grpo_every_steps is not None and evaluates_on_vllm:
        return _Engine(holds_training_weights=False)  # ours, for evaluation: a second copy, like TRL's
    return None


def _phases(config: PipelineConfig, gpu_bytes: int, backend: Backend) -> tuple[tuple[PhaseEstimate, ...], int]:
    shape, model = model_shape(config), config.model
    dtype_bytes = 4 if model.dtype == "float32" else 2  # auto = bf16/fp16 on CUDA
    weights = (shape.linear_parameters * 0.52 + (shape.parameters - shape.linear_parameters) * 2
               if model.load_in_4bit else shape.parameters * dtype_bytes)  # NF4 + double-quantised scales  # fmt: skip
    beside = _engine(config, backend)
    engine = _engine_share(config, backend, gpu_bytes)
    generation_batch = config.grpo_training.per_device_train_batch_size * config.grpo_training.gradient_accumulation_steps
    kv_batch = generation_batch * model.max_seq_length * shape.kv_bytes_per_token(dtype_bytes)
    shortfall = int(weights + kv_batch - engine) if engine else 0
    sft_tokens = config.sft_training.per_device_train_batch_size * math.ceil(
        model.max_seq_length * config.data.sft_max_length_fraction)
    grpo = config.grpo_training
    grpo_length = (grpo.max_prompt_length + grpo.max_completion_length
                   if grpo.max_prompt_length and grpo.max_completion_length else model.max_seq_length)  # fmt: skip
    phases = []
    for phase, section, tokens in (("sft", config.sft_training, sft_tokens),
                                   ("grpo", grpo, grpo.per_device_train_batch_size * grpo_length)):  # fmt: skip
        parts = {"weights": int(weights), **_training_state(config, shape, section.optim, dtype_bytes),
                 "activations": _activations(config, shape, tokens, dtype_bytes),
                 "logits": tokens * shape.vocab_size * 4, "cuda": CUDA_OVERHEAD}  # fmt: skip
        if phase == "grpo" and grpo.beta > 0 and not model.uses_lora:
            parts["reference model"] = int(weights)
        if phase == "grpo" and not engine:
            parts["kv cache"] = kv_batch  # model.generate's cache for one generation batch
        if beside and beside.holds_training_weights:
            parts["vllm engine"], parts["weights"] = engine, 0  # Unsloth's engine holds the weights training uses
        elif beside and phase == "grpo":
            parts["vllm engine"] = engine  # TRL's colocated engine, or ours, loads a second copy of the weights
        phases.append(PhaseEstimate(phase, parts))
    return tuple(phases), shortfall


def _engine_share(config: PipelineConfig, backend: Backend, gpu_bytes: int) -> int:
    """Bytes reserved by the vLLM engine beside training (``_engine``), 0 when there is none."""
    beside = _engine(config, backend)
    if beside is None:
        return 0
    return int(config.grpo_training.engine_memory_share(beside.holds_training_weights) * gpu_bytes)


def _training_state(config: PipelineConfig, shape: ModelShape, optim: str, dtype_bytes: int) -> dict[str, int]:
    """Trainable copies, gradients and optimizer moments (LoRA adapters are kept in fp32)."""
    lora = config.model.lora if config.model.uses_lora else None
    if lora:
        trainable = shape.lora_parameters(lora.rank, list(lora.target_modules), list(lora.modules_to_save))
        param_bytes, extra = 4, trainable * 4  # the adapters themselves live beside the frozen weights
    else:
        trainable, param_bytes, extra = shape.parameters, dtype_bytes, 0
    moment_bytes = 1 if "8bit" in optim else 0 if optim.startswith("sgd") else param_bytes
    return {"trainable": extra, "gradients": trainable * param_bytes, "optimizer": trainable * 2 * moment_bytes}


def _activations(config: PipelineConfig, shape: ModelShape, tokens: int, dtype_bytes: int) -> int:
    per_layer = tokens * shape.activation_elements_per_token() * dtype_bytes
    if config.model.gradient_checkpointing:  # each layer's input, plus one layer recomputed at a time
        return shape.num_layers * tokens * shape.hidden_size * dtype_bytes + per_layer
    return shape.num_layers * per_layer


def _first_change(config: PipelineConfig, gpu_bytes: int, backend: Backend) -> str | None:
    """The first candidate, in order of least harm to the result, whose estimate fits; else the biggest saver."""
    best, best_total = None, None
    for overrides in _candidates(config, gpu_bytes, backend):
        try:
            changed = config.with_overrides(list(overrides))
        except ConfigError:
            continue
        phases, shortfall = _phases(changed, gpu_bytes, backend)
        worst = max(p.total for p in phases) + max(shortfall, 0)
        if shortfall <= 0 and worst <= gpu_bytes:
            return " ".join(f"--set {o}" for o in overrides)
        if best_total is None or worst < best_total:
            best, best_total = overrides, worst
    return None if best is None else " ".join(f"--set {o}" for o in best) + " (not enough alone)"


def _candidates(config: PipelineConfig, gpu_bytes: int, backend: Backend) -> list[tuple[str, ...]]:
    model, out = config.model, []
    if not model.gradient_checkpointing:
        out.append(("model.gradient_checkpointing=true",))
    for section in ("sft_training", "grpo_training"):
        if "8bit" not in getattr(config, section).optim:
            out.append((f"{section}.optim=adamw_8bit",))
    if current := _engine_share(config, backend, gpu_bytes):
        for share in (x / 20 for x in range(19, 3, -1)):  # 0.95 .. 0.20: the engine's share that fits, if any
            if int(share * gpu_bytes) != current:
                out.append((f"{ENGINE_SHARE_SETTING}={share:.2f}",))
    for section in ("sft_training", "grpo_training"):
        batch, steps = getattr(config, section).per_device_train_batch_size, getattr(config, section).gradient_accumulation_steps
        if batch > 1:
            out.append((f"{section}.per_device_train_batch_size={batch // 2}",
                        f"{section}.gradient_accumulation_steps={steps * 2}"))  # fmt: skip
    if model.uses_lora and not model.load_in_4bit:
        out.append(("model.load_in_4bit=true",))
    out.append((f"model.max_seq_length={model.max_seq_length // 2}",))
    return out
