"""The Unsloth backend: ``FastLanguageModel`` for loading, LoRA, a colocated vLLM engine and merged export.

Import order matters: unsloth patches transformers, trl and peft when it is imported, so it must come
first. ``import_unsloth()`` is the one place that imports it; the pipeline calls it (through
``choose_backend``) before anything imports trl or transformers. It refuses on a machine without CUDA:
unsloth 2026.10.7 raises there, and newer releases switch into a CPU mode that replaces ``trl.SFTTrainer``.

This module imports nothing heavy at import time, so it is safe to import on any machine. Its GPU path was
written against Unsloth 2026.10's API (``unsloth/models/loader.py``) and has not been executed here
(see docs/gpu.md).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..config import ModelConfig
from ..errors import ModelError
from .hardware import resolve_dtype

__all__ = ["UnslothBackend", "import_unsloth"]

logger = logging.getLogger(__name__)


def import_unsloth() -> ModuleType:
    """Import unsloth (once) before trl/transformers/peft; raise ModelError where it cannot run."""
    if "unsloth" in sys.modules:
        return sys.modules["unsloth"]
    if not torch.cuda.is_available():
        raise ModelError("model.backend: unsloth needs a CUDA GPU; use backend: hf (or auto) on this machine")
    late = [name for name in ("transformers", "trl", "peft") if name in sys.modules]
    if late:
        logger.warning(
            "unsloth is imported after %s; its patches may not apply. Call "
            "llm_finetuning.model.choose_backend() before importing trl/transformers.",
            ", ".join(late),
        )
    import unsloth

    return unsloth


class UnslothBackend:
    """Load, adapt and export through Unsloth's ``FastLanguageModel``."""

    name = "unsloth"

    def load_trainable(self, model_config: ModelConfig, model_path: str) -> tuple[Any, Any]:
        fast = import_unsloth().FastLanguageModel
        if model_config.fast_inference and importlib.util.find_spec("vllm") is None:
            raise ModelError(
                "model.fast_inference: vLLM is not installed; install the gpu extra (uv sync --extra gpu) "
                "or set fast_inference: false"
            )
        checkpointing = "unsloth" if model_config.gradient_checkpointing else False
        lora = model_config.lora if model_config.uses_lora else None
        model, tokenizer = fast.from_pretrained(
            model_name=model_path,
            max_seq_length=model_config.max_seq_length,
            dtype=_unsloth_dtype(model_config),
            load_in_4bit=model_config.load_in_4bit,
            full_finetuning=lora is None,
            fast_inference=model_config.fast_inference,
            gpu_memory_utilization=model_config.gpu_memory_utilization,
            max_lora_rank=lora.rank if lora else 64,
            use_gradient_checkpointing=checkpointing,
            random_state=model_config.random_state,
        )
        if lora is None:
            return model, tokenizer
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
            fast_inference=False,
        )
        fast.for_inference(model)
        return model, tokenizer

    def save_merged(
        self, model: Any, tokenizer: Any, model_config: ModelConfig, base_path: str, staging: Path
    ) -> None:
        # Unsloth dequantises a 4-bit base before merging, so the export is 16-bit either way.
        model.save_pretrained_merged(str(staging), tokenizer, save_method="merged_16bit")


def _unsloth_dtype(model_config: ModelConfig) -> torch.dtype | None:
    return None if model_config.dtype == "auto" else resolve_dtype(model_config)  # None = unsloth's choice
