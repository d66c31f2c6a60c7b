"""The transformers + peft backend: runs on CPU (the tiny demo, the tests) and on any CUDA GPU.

The weights' dtype follows the hardware rules (``model/hardware.py``: fp32 on a CPU without bf16 arithmetic,
bf16 where the CPU or GPU computes it, 4-bit NF4 through bitsandbytes on CUDA when ``load_in_4bit``), and
gradient checkpointing follows ``model.gradient_checkpointing`` on every device. LoRA is peft's ``LoraConfig``
with the same fields the Unsloth backend uses. transformers and peft are imported when something loads, so choosing
this backend (``backends.py``) costs nothing.

GRPO generates with ``model.generate`` in the trainer, or with TRL's own vLLM engine (``grpo_training.use_vllm``;
null: where vLLM is installed and pays off, ``hardware.vllm_pays_off``), colocated in this process or on a ``trl
vllm-serve`` server. That engine holds a second copy of the weights, sized by
``grpo_training.vllm_gpu_memory_utilization`` (null: TRL's default).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path
from typing import Any

import torch

from ..config import ModelConfig, PipelineConfig
from ..errors import ModelError
from .backend import Backend, Rollouts
from .hardware import gradient_checkpointing, vllm_pays_off
from .shape import parameter_count

__all__ = ["HFBackend", "load_hf_model", "load_hf_tokenizer", "load_kwargs"]

logger = logging.getLogger(__name__)


def load_hf_tokenizer(path: str | Path) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"cannot load a tokenizer from {path} ({_first_line(exc)}); check model.model_name"
        ) from None


def load_kwargs(model_config: ModelConfig, cuda: bool, dtype: torch.dtype) -> dict[str, Any]:
    """``from_pretrained`` keywords: ``dtype``; on CUDA this rank's GPU (``LOCAL_RANK``) and 4-bit if asked.

    The device comes from the launch, not from ``torch.cuda.current_device()``, which is still GPU 0 for every
    rank until something sets it. Under DeepSpeed ZeRO-3 there is no device map: ``zero.Init`` places and
    partitions the weights itself (transformers refuses a device map there).
    """
    from transformers.integrations import is_deepspeed_zero3_enabled

    from ..runtime.distributed import device_for, read_launch

    kwargs: dict[str, Any] = {"dtype": dtype}
    if cuda:
        if not is_deepspeed_zero3_enabled():
            kwargs["device_map"] = {"": str(device_for(read_launch()))}
        if model_config.load_in_4bit:
            kwargs["quantization_config"] = _four_bit_config(kwargs["dtype"])
    return kwargs


def load_hf_model(path: str | Path, model_config: ModelConfig, cuda: bool, dtype: torch.dtype) -> Any:
    """``AutoModelForCausalLM`` in ``dtype``, on this rank's GPU with ``cuda`` (4-bit if asked)."""
    from transformers import AutoModelForCausalLM

    kwargs = load_kwargs(model_config, cuda, dtype)
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"cannot load a model from {path} ({_first_line(exc)}); check model.model_name"
        ) from None


def _four_bit_config(compute_dtype: torch.dtype) -> Any:
    from transformers import BitsAndBytesConfig

    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModelError(
            "model.load_in_4bit needs bitsandbytes; install the gpu extra (uv sync --extra gpu) or set load_in_4bit: false"
        )
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute_dtype,
    )


def lora_config(model_config: ModelConfig, tied_embeddings: bool = False) -> Any:
    from peft import LoraConfig

    lora = model_config.lora
    assert lora is not None
    return LoraConfig(
        # A trained copy of a tied embedding must stay the output layer too (the tiny model ties them).
        ensure_weight_tying=tied_embeddings and bool(lora.modules_to_save),
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        modules_to_save=list(lora.modules_to_save) or None,
        bias="none",
        task_type="CAUSAL_LM",
    )


class HFBackend(Backend):
    """Load, adapt and export with transformers + peft; GRPO rollouts on model.generate or TRL's vLLM engine."""

    name = "hf"
    engine_holds_training_weights = False

    def load_trainable(self, config: PipelineConfig, model_path: str, dtype: torch.dtype) -> tuple[Any, Any]:
        from peft import get_peft_model, prepare_model_for_kbit_training

        model_config = config.model
        tokenizer = load_hf_tokenizer(model_path)
        model = load_hf_model(model_path, model_config, self.machine.cuda, dtype)
        checkpointing = gradient_checkpointing(model_config)
        if model_config.load_in_4bit:
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=checkpointing)
        if checkpointing:  # non-reentrant, as the trainer re-enables it (and each phase sets its own)
            self.checkpoint_activations(model, True)
        if not model_config.uses_lora:
            model.requires_grad_(True)
            return model, tokenizer
        with torch.random.fork_rng(devices=[]):  # the adapter initialised from the run's seed, caller RNG untouched
            torch.manual_seed(config.seed)
            try:
                tied = bool(getattr(model.config, "tie_word_embeddings", False))
                model = get_peft_model(model, lora_config(model_config, tied))
            except ValueError as exc:
                raise ModelError(
                    f"model.lora.target_modules: {_first_line(exc)}; list module names this model has"
                ) from None
        return model, tokenizer

    def load_inference(
        self, config: PipelineConfig, base_path: str, adapter_path: Path, dtype: torch.dtype
    ) -> tuple[Any, Any]:
        from peft import PeftModel

        cuda, model_config = self.machine.cuda, config.model
        if not (adapter_path / "adapter_config.json").is_file():  # a full or merged model save
            return load_hf_model(adapter_path, model_config, cuda, dtype).eval(), load_hf_tokenizer(adapter_path)
        base = load_hf_model(base_path, model_config, cuda, dtype)
        model = PeftModel.from_pretrained(base, str(adapter_path), is_trainable=False)
        return model.eval(), load_hf_tokenizer(adapter_path)

    def save_merged(
        self, model: Any, tokenizer: Any, model_config: ModelConfig, base_path: str, staging: Path, dtype: torch.dtype
    ) -> None:
        # Merge into a fresh, unquantised copy of the base so the training model stays usable (and a
        # 4-bit base still exports full-precision weights). The copy lives on the CPU while merging.
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        adapter_dir = staging / "_adapter"
        model.save_pretrained(str(adapter_dir))
        dtype = _export_dtype(model_config, dtype)
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
        merged.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        shutil.rmtree(adapter_dir)

    def choose_rollouts(self, config: PipelineConfig) -> tuple[Rollouts, str]:
        """TRL's vLLM engine as configured; null: where vLLM loads and pays off (``hardware.vllm_pays_off``: on a
        CUDA GPU, and on a CPU for a model of 50M parameters or more), else model.generate."""
        section = config.grpo_training
        if section.use_vllm is False:
            return "generate", "grpo_training.use_vllm: false"
        reason = "grpo_training.use_vllm: true"
        if section.use_vllm is None:
            problem = self.machine.vllm_problem
            worth, why = (False, problem) if problem else vllm_pays_off(parameter_count(config), self.machine.cuda)
            if not worth:
                return "generate", f"auto: {why}"
            reason = f"auto: {why}"
        return ("trl_server" if section.vllm_mode == "server" else "trl_colocate"), reason

    def vllm_refusal(self, model_config: ModelConfig) -> str | None:
        if model_config.load_in_4bit:
            return "4-bit weights of the hf backend cannot be pushed into a vLLM engine"
        return None


def _export_dtype(model_config: ModelConfig, dtype: torch.dtype) -> torch.dtype:
    """16-bit for a model trained in 16 bits (or 4 bits); fp32 stays fp32 so the export matches bit for bit."""
    if model_config.load_in_4bit and dtype == torch.float32:
        return torch.bfloat16
    return dtype


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
