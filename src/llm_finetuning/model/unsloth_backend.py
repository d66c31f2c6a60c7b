"""The Unsloth backend: ``FastLanguageModel`` for loading, LoRA, a vLLM engine built with the model, and exports.

Import order matters: unsloth patches transformers, trl and peft when it is imported, so it must come
first. ``import_unsloth()`` is the one place that imports it; the run calls it (``UnslothBackend.prepare``)
before anything imports trl or transformers.

Unless ``grpo_training.use_vllm`` (the run's one engine choice) is false, ``FastLanguageModel.from_pretrained``
on a CUDA GPU also starts a vLLM engine that shares the model's weights (Unsloth's ``fast_inference``), sized by
``grpo_training.vllm_gpu_memory_utilization`` (null: 0.7); Unsloth's compiled GRPO trainer then generates every
rollout on it, so the config must not ask for anything else (``check_config``). Unsloth refuses that engine with
full fine-tuning and with LoRA ``modules_to_save``, and there is none without CUDA: with ``use_vllm: null`` the
run then generates with ``model.generate``, with a notice; with ``use_vllm: true`` it stops with one line
(``has_engine``, ``_engine_at_load``).

Without CUDA, unsloth 2026.10.9+ runs in its CPU mode: ``FastLanguageModel`` is then a thin layer over
transformers + peft, TRL's configs get CPU defaults (fused AdamW, no packing) and ``trl.SFTTrainer`` is
replaced by a subclass. CI runs this backend that way (``pytest -m unsloth``). The CUDA path (fused kernels,
the vLLM engine, 4-bit) has not been executed; its keywords are checked against the locked wheels by
tests/test_gpu_contracts.py.

This module imports nothing heavy at import time, so it is safe to import on any machine.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..config import ConfigError, ModelConfig, PipelineConfig
from ..errors import ModelError
from .backend import Backend, Rollouts

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


class UnslothBackend(Backend):
    """Load, adapt and export through Unsloth's ``FastLanguageModel``; GRPO rollouts on the model's engine."""

    name = "unsloth"
    several_processes = False  # Unsloth trains in one process
    engine_holds_training_weights = True
    model_code_is_transformers = False  # Unsloth patches the model's forward and compiles GRPO's loss

    def asked_for(self) -> str:
        if self.machine.cuda:
            return "model.backend: unsloth was asked for and CUDA is available"
        return "model.backend: unsloth was asked for; no CUDA GPU, so Unsloth runs in its CPU mode"

    @classmethod
    def import_problem(cls) -> str | None:
        if importlib.util.find_spec("unsloth") is None:
            return "not installed"
        try:
            import_unsloth()
        except Exception as exc:  # noqa: BLE001 - a broken unsloth install raises anything; each means "use hf"
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
        return None

    def prepare(self) -> None:
        import_unsloth()

    def check_config(self, config: PipelineConfig) -> None:
        super().check_config(config)
        section = config.grpo_training
        for phase in ("sft_training", "grpo_training"):
            own = getattr(config, phase).gradient_checkpointing
            if own is not None and own != config.model.gradient_checkpointing:
                raise ConfigError(
                    f"{phase}.gradient_checkpointing: {str(own).lower()}, but Unsloth builds its activation "
                    "checkpointing into the model for the whole run; set model.gradient_checkpointing instead, or "
                    "model.backend=hf"
                )
        if section.vllm_mode == "server":
            raise ConfigError(
                "grpo_training.vllm_mode: server, but Unsloth generates with its own engine in the training process "
                "(or with model.generate); set model.backend=hf to generate with a vLLM server, or vllm_mode: colocate"
            )
        if section.line_credit is not None and self.machine.cuda:
            raise ConfigError(
                "grpo_training.line_credit gives advantages per token, and Unsloth's compiled GRPO loss on CUDA was "
                "never run with them (TRL's loss takes them); set model.backend=hf, or line_credit: null"
            )
        if section.sft_anchor > 0:
            raise ConfigError(
                "grpo_training.sft_anchor adds a second forward pass (SFT's rows) to each GRPO loss pass, and "
                "Unsloth's compiled GRPO trainer, whose forward may return hidden states for its own loss, was never "
                "run with it; set model.backend=hf, or sft_anchor: 0"
            )
        refused = self.engine_problem(config.model)
        if section.use_vllm and refused:
            raise ConfigError(_engine_refused(refused))

    # Loading and saving

    def load_trainable(self, config: PipelineConfig, model_path: str, dtype: torch.dtype) -> tuple[Any, Any]:
        fast = import_unsloth().FastLanguageModel
        model_config = config.model
        checkpointing = "unsloth" if model_config.gradient_checkpointing else False
        lora = model_config.lora if model_config.uses_lora else None
        model, tokenizer = fast.from_pretrained(
            model_name=model_path,
            max_seq_length=model_config.max_seq_length,
            dtype=dtype,  # the run's, passed explicitly: left to Unsloth (None), its CPU mode and the hf backend
            load_in_4bit=model_config.load_in_4bit,  # would not load the same weights for dtype: auto
            full_finetuning=lora is None,
            fast_inference=self._engine_at_load(config),
            gpu_memory_utilization=config.grpo_training.engine_memory_share(holds_training_weights=True),
            max_lora_rank=lora.rank if lora else 64,
            use_gradient_checkpointing=checkpointing,
            random_state=config.seed,  # the run's seed initialises the adapter
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
            random_state=config.seed,  # the run's seed initialises the adapter
            modules_to_save=list(lora.modules_to_save) or None,
            ensure_weight_tying=True if tied else None,  # None: Unsloth's own rule
        )
        return model, tokenizer

    def load_inference(
        self, config: PipelineConfig, base_path: str, adapter_path: Path, dtype: torch.dtype
    ) -> tuple[Any, Any]:
        # Unsloth reads the base model from the adapter's adapter_config.json (base_path is not needed).
        fast = import_unsloth().FastLanguageModel
        model_config = config.model
        model, tokenizer = fast.from_pretrained(
            model_name=str(adapter_path),
            max_seq_length=model_config.max_seq_length,
            dtype=dtype,
            load_in_4bit=model_config.load_in_4bit,
            fast_inference=self._engine_at_load(config),  # a tool that does not generate on it sets use_vllm: false
            gpu_memory_utilization=config.grpo_training.engine_memory_share(holds_training_weights=True),
            max_lora_rank=model_config.lora.rank if model_config.uses_lora else 64,
        )
        fast.for_inference(model)
        return model, tokenizer

    def save_merged(
        self, model: Any, tokenizer: Any, model_config: ModelConfig, base_path: str, staging: Path, dtype: torch.dtype
    ) -> None:
        # Unsloth dequantises a 4-bit base before merging, so the export is 16-bit either way.
        model.save_pretrained_merged(str(staging), tokenizer, save_method="merged_16bit")

    def save_gguf(self, model: Any, tokenizer: Any, output: Path, quantization: str) -> list[Path]:
        """Unsloth writes the merged 16-bit model into ``output`` and the GGUF files beside it, into
        ``<output>_gguf`` (``unsloth/save.py``), and returns where in ``gguf_files``."""
        output.mkdir(parents=True, exist_ok=True)
        written = model.save_pretrained_gguf(str(output), tokenizer, quantization_method=quantization)
        files = [Path(name) for name in (written or {}).get("gguf_files") or []]
        if not files:
            raise ModelError(f"--gguf {output}: Unsloth reported no GGUF file written; see its output above")
        return files

    # Training

    def trainer_checkpointing(self, model_config: ModelConfig, phase_setting: bool | None = None) -> bool:
        return False  # Unsloth applies its own activation checkpointing when it builds the LoRA model

    def checkpoint_activations(self, model: Any, on: bool) -> None:
        """Nothing: Unsloth's checkpointing is built into the model for the whole run (``check_config`` refuses a
        phase of its own)."""

    def check_trainer(self, trainer: Any) -> None:
        """On CUDA the model must train with Unsloth's compiled trainer, which Unsloth silently replaces by TRL's
        own when its patching fails (its warning scrolls by; the run would be slow and differently set)."""
        if not self.machine.cuda:
            return  # without CUDA, Unsloth's CPU mode trains with TRL's trainers on purpose
        if not any(cls.__name__.startswith("Unsloth") for cls in type(trainer).__mro__):
            raise ModelError(
                f"the unsloth backend built TRL's own {type(trainer).__name__}: Unsloth could not patch it (see its "
                "warning above); reinstall the gpu extra (uv sync --extra gpu --reinstall) or set model.backend: hf"
            )

    def choose_rollouts(self, config: PipelineConfig) -> tuple[Rollouts, str]:
        """Unsloth's trainer generates on the model's engine whenever the model has one."""
        if self.has_engine(config):
            return "model_engine", "grpo_training.use_vllm: Unsloth's trainer generates on the engine it built"
        why = self.engine_problem(config.model) or "grpo_training.use_vllm: false"
        return "generate", f"no engine on the model ({why})"

    # Generation and memory

    def model_engine(self, model: Any) -> Any:
        return getattr(model, "vllm_engine", None)

    # The engine Unsloth builds with the model

    def engine_problem(self, model_config: ModelConfig) -> str | None:
        """Why Unsloth cannot start its vLLM engine for this model (None when it can).

        Unsloth refuses ``fast_inference`` with full fine-tuning (``models/vision.py``) and with LoRA
        ``modules_to_save`` (``models/llama.py`` get_peft_model), and without CUDA it has no engine at all.
        """
        if not self.machine.cuda:
            return "no CUDA GPU"
        if not model_config.uses_lora:
            return "Unsloth's vLLM engine does not support full fine-tuning (model.lora is null)"
        if model_config.lora is not None and model_config.lora.modules_to_save:
            return "Unsloth's vLLM engine does not support model.lora.modules_to_save"
        return None

    def has_engine(self, config: PipelineConfig) -> bool:
        """Whether the model gets Unsloth's vLLM engine: unless ``use_vllm`` is false, where the engine can start."""
        return config.grpo_training.vllm_allowed and self.engine_problem(config.model) is None

    def _engine_at_load(self, config: PipelineConfig) -> bool:
        """``fast_inference`` for ``from_pretrained``, with a one-line notice or error where it cannot be had."""
        if not config.grpo_training.vllm_allowed:
            return False
        refused = self.engine_problem(config.model)
        if refused and config.grpo_training.use_vllm:
            raise ModelError(_engine_refused(refused))
        if refused:
            context = "" if self.machine.cuda else f" ({self.machine.vllm_problem})"  # also say what vLLM lacks
            logger.warning("grpo_training.use_vllm: null, and Unsloth's vLLM engine cannot start: %s%s; GRPO "
                           "generates with model.generate", refused, context)  # fmt: skip
            return False
        problem = self.machine.vllm_problem
        if problem:
            raise ModelError(f"grpo_training.use_vllm: {problem}, or set use_vllm: false")
        return True


def _engine_refused(refused: str) -> str:
    return (f"grpo_training.use_vllm: true, but Unsloth's vLLM engine cannot start here: {refused}; set use_vllm: "
            "null to generate with model.generate where it cannot")
