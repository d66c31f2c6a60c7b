"""The Unsloth backend: ``FastLanguageModel`` for loading, LoRA, a colocated vLLM engine and merged export.

Import order matters: unsloth patches transformers, trl and peft when it is imported, so it must come
first. ``import_unsloth()`` is the one place that imports it; the pipeline calls it (through
``choose_backend``) before anything imports trl or transformers.

Without CUDA, unsloth 2026.10.9+ runs in its CPU mode: ``FastLanguageModel`` is then a thin layer over
transformers + peft, TRL's configs get CPU defaults (fused AdamW, no packing) and ``trl.SFTTrainer`` is
replaced by a subclass. There is no vLLM engine, so ``fast_inference`` is turned off with a notice. CI runs
this backend that way (``pytest -m unsloth``). The CUDA path (fused kernels, the vLLM engine, 4-bit) has
not been executed; its keywords are checked against the locked wheels by tests/test_gpu_contracts.py.

This module imports nothing heavy at import time, so it is safe to import on any machine.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..config import ModelConfig, PipelineConfig
from ..errors import ModelError
from .backends import vllm_problem
from .hardware import on_cuda, resolve_dtype, unsloth_engine_problem

__all__ = ["UnslothBackend", "import_unsloth"]

logger = logging.getLogger(__name__)


def import_unsloth() -> ModuleType:
    """Import unsloth (once), before trl/transformers/peft; on a machine without CUDA it enters its CPU mode."""
    if "unsloth" in sys.modules:
        return sys.modules["unsloth"]
    late = [name for name in ("transformers", "trl", "peft") if name in sys.modules]
    if late:
        logger.warning(
            "unsloth is imported after %s; its patches may not apply. Call "
            "llm_finetuning.model.choose_backend() before importing trl/transformers.",
            ", ".join(late),
        )
    import unsloth

    return unsloth


def request_vllm_standby(config: PipelineConfig) -> None:
    """Ask Unsloth's engine for sleep mode when GRPO's ``vllm_enable_sleep_mode`` is on.

    Unsloth reads ``UNSLOTH_VLLM_STANDBY`` once, when it is imported, and its trainer then takes TRL's
    ``vllm_enable_sleep_mode`` from the engine: set here, the engine and the trainer agree with the config.
    """
    wanted = config.grpo_training.vllm_enable_sleep_mode and config.model.fast_inference and on_cuda()
    if wanted and "unsloth" in sys.modules and os.environ.get("UNSLOTH_VLLM_STANDBY", "0") == "0":
        logger.warning("grpo_training.vllm_enable_sleep_mode: unsloth was imported before the run could ask "
                       "for its engine's sleep mode; set UNSLOTH_VLLM_STANDBY=1 before importing it")
    elif wanted:
        os.environ.setdefault("UNSLOTH_VLLM_STANDBY", "1")


class UnslothBackend:
    """Load, adapt and export through Unsloth's ``FastLanguageModel``."""

    name = "unsloth"

    def load_trainable(self, model_config: ModelConfig, model_path: str) -> tuple[Any, Any]:
        fast = import_unsloth().FastLanguageModel
        fast_inference = _engine_wanted(model_config)
        checkpointing = "unsloth" if model_config.gradient_checkpointing else False
        lora = model_config.lora if model_config.uses_lora else None
        model, tokenizer = fast.from_pretrained(
            model_name=model_path,
            max_seq_length=model_config.max_seq_length,
            dtype=_unsloth_dtype(model_config),
            load_in_4bit=model_config.load_in_4bit,
            full_finetuning=lora is None,
            fast_inference=fast_inference,
            gpu_memory_utilization=model_config.gpu_memory_utilization,
            max_lora_rank=lora.rank if lora else 64,
            use_gradient_checkpointing=checkpointing,
            random_state=model_config.random_state,
        )
        if lora is None:
            return model, tokenizer
        # A trained copy of a tied embedding must stay the output layer too, as in the hf backend.
        tied = bool(getattr(model.config, "tie_word_embeddings", False)) and bool(lora.modules_to_save)
        model = fast.get_peft_model(
            model,
            r=lora.rank,
            target_modules=list(lora.target_modules),
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            bias="none",
            use_gradient_checkpointing=checkpointing,
            random_state=model_config.random_state,
            modules_to_save=list(lora.modules_to_save) or None,
            ensure_weight_tying=True if tied else None,  # None: Unsloth's own rule
        )
        return model, tokenizer

    def load_inference(
        self, model_config: ModelConfig, base_path: str, adapter_path: Path
    ) -> tuple[Any, Any]:
        # Unsloth reads the base model from the adapter's adapter_config.json (base_path is not needed).
        fast = import_unsloth().FastLanguageModel
        model, tokenizer = fast.from_pretrained(
            model_name=str(adapter_path),
            max_seq_length=model_config.max_seq_length,
            dtype=_unsloth_dtype(model_config),
            load_in_4bit=model_config.load_in_4bit,
            fast_inference=_engine_wanted(model_config),  # on only for a tool that generates on the engine
            gpu_memory_utilization=model_config.gpu_memory_utilization,
            max_lora_rank=model_config.lora.rank if model_config.uses_lora else 64,
        )
        fast.for_inference(model)
        return model, tokenizer

    def save_merged(
        self, model: Any, tokenizer: Any, model_config: ModelConfig, base_path: str, staging: Path
    ) -> None:
        # Unsloth dequantises a 4-bit base before merging, so the export is 16-bit either way.
        model.save_pretrained_merged(str(staging), tokenizer, save_method="merged_16bit")


def _engine_wanted(model_config: ModelConfig) -> bool:
    """``model.fast_inference`` where a vLLM engine can start; a one-line notice or error where it cannot."""
    if not model_config.fast_inference:
        return False
    refused = unsloth_engine_problem(model_config)
    if refused:
        context = "" if on_cuda() else f" ({vllm_problem()})"  # without CUDA, also say what vLLM lacks
        logger.warning("model.fast_inference: off, %s%s; GRPO generates with model.generate", refused, context)
        return False
    problem = vllm_problem()
    if problem:
        raise ModelError(f"model.fast_inference: {problem}, or set fast_inference: false")
    return True


def _unsloth_dtype(model_config: ModelConfig) -> torch.dtype | None:
    return None if model_config.dtype == "auto" else resolve_dtype(model_config)  # None = unsloth's choice
