"""``ModelManager``: the one object that loads, adapts, saves, reloads and frees the model.

It loads through the run's backend (``backends.choose_backend``: unsloth on CUDA when it imports, else
transformers + peft) the base model (building the offline tiny model for ``builtin:tiny-qwen3``), adds LoRA
adapters (or makes every weight trainable when ``model.lora`` is null or disabled), and gives the tokenizer
our chat template. Saves are atomic (``adapters.atomic_directory``) and carry the tokenizer and
``chat_template.jinja``.

    manager = Session.open(cfg).manager        # the run's backend and precision (session/session.py)
    model, tokenizer = manager.load()          # trainable
    manager.save_adapter("outputs/sft/final")
    manager.free()
    # a saved adapter for inference: Session.for_inference(cfg, "outputs/sft/final").manager

What generates with the model is not the manager's: the generation engines are in ``rollout/``, and any
vLLM engine (Unsloth's on the model included) is owned and torn down by ``rollout.EngineOwner``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..errors import ModelError
from .adapters import atomic_directory, recover_previous
from .backend import Backend
from .hardware import Precision, free_memory
from .own_template import TemplateChoice, choose_template
from .sources import BUILTIN_MODELS, base_model_path
from .template import apply_chat_template_to

__all__ = ["ModelManager"]

logger = logging.getLogger(__name__)


class ModelManager:
    """Owns the model and tokenizer of one run; ``backend`` is the library that loads them (``.name``, ``.reason``)."""

    def __init__(self, config: PipelineConfig, backend: Backend, precision: Precision) -> None:
        self.config, self.precision = config, precision  # the run's (RunPlan.precision), decided once
        self.backend = backend
        logger.info("model backend: %s (%s)", self.backend.name, self.backend.reason)
        self.model: Any = None
        self.tokenizer: Any = None
        self.base_path: str | None = None  # Hub id or local directory the base weights came from
        self.template: TemplateChoice | None = None  # whose chat template the tokenizer got, and why

    @property
    def uses_lora(self) -> bool:
        return self.config.model.uses_lora

    def load(self) -> tuple[Any, Any]:
        """Load the base model with LoRA (or fully trainable) and the tokenizer with the chat template
        ``prompt.template_source`` chooses."""
        self.base_path = base_model_path(self.config)
        model, tokenizer = self.backend.load_trainable(self.config, self.base_path, self.precision.weights)
        self.template = choose_template(tokenizer, self.config.prompt)
        logger.info("chat template: %s (%s)", self.template.source, self.template.reason)
        self.model, self.tokenizer = model, _prepare_tokenizer(model, tokenizer)
        trainable, total = self.parameter_counts()
        mode = "LoRA" if self.uses_lora else "full fine-tuning"
        logger.info("loaded %s (%s): %d of %d parameters trainable", self.base_path, mode, trainable, total)
        return self.model, self.tokenizer

    def parameter_counts(self) -> tuple[int, int]:
        """``(trainable, total)`` parameter counts of the loaded model."""
        self._require_loaded()
        sizes = [(getattr(p, "ds_numel", p.numel()), p.requires_grad) for p in self.model.parameters()]  # ZeRO-3
        return sum(size for size, trainable in sizes if trainable), sum(size for size, _ in sizes)

    def load_adapter(self, path: str | Path) -> tuple[Any, Any]:
        """Continue from a saved adapter (or full model save): its weights go into the loaded, trainable model."""
        if self.model is None:
            self.load()
        path = Path(path)
        recover_previous(path)
        if not path.is_dir():
            raise ModelError(
                f"{path}: no saved adapter there; run SFT first or point at a directory from save_adapter"
            )
        if self.uses_lora:
            self._load_lora_weights(path)
        else:
            self._load_full_weights(path)
        logger.info("continuing from %s", path)
        return self.model, self.tokenizer

    def _load_lora_weights(self, path: Path) -> None:
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        _check_adapter_matches(path, self.config)
        device = next(self.model.parameters()).device
        try:
            result = set_peft_model_state_dict(self.model, load_peft_weights(str(path), device=str(device)))
        except RuntimeError as exc:  # the same rank and modules, but another base model's shapes
            raise _misfit(path, self.base_path, exc) from None
        missing = [key for key in result.missing_keys if "lora_" in key]
        if missing or result.unexpected_keys:
            raise ModelError(
                f"{path}: adapter weights do not fit this model (missing {missing[:3]}, unexpected "
                f"{list(result.unexpected_keys)[:3]}); use the base model and model.lora it was trained with"
            )

    def _load_full_weights(self, path: Path) -> None:
        from transformers import AutoModelForCausalLM

        if not (path / "config.json").is_file():
            raise ModelError(
                f"{path}: not a full model save (no config.json); with model.lora set, load it as an adapter"
            )
        from ..runtime.distributed import full_weights

        reference = next(self.model.parameters())
        saved = AutoModelForCausalLM.from_pretrained(str(path), dtype=reference.dtype)
        try:
            with full_weights(saved):  # under ZeRO-3 the copy loads partitioned too; the caller gathers ours
                self.model.load_state_dict(saved.state_dict(), strict=True)
        except RuntimeError as exc:
            raise ModelError(
                f"{path}: saved weights do not fit this model ({str(exc).splitlines()[0]})"
            ) from None
        finally:
            del saved

    def save_adapter(self, path: str | Path) -> Path:
        """Atomically save the adapter (the whole model under full fine-tuning) plus the tokenizer."""
        self._require_loaded()
        with atomic_directory(path, kind="adapter" if self.uses_lora else "model") as staging:
            self.model.save_pretrained(str(staging))
            self.tokenizer.save_pretrained(str(staging))
        logger.info("saved %s to %s", "adapter" if self.uses_lora else "model", path)
        return Path(path)

    def merge_and_save(self, path: str | Path) -> Path:
        """Atomically save LoRA merged into the base weights (16-bit for GPU runs), loadable by plain transformers."""
        self._require_loaded()
        with atomic_directory(path, kind="merged") as staging:
            if self.uses_lora:
                self.backend.save_merged(self.model, self.tokenizer, self.config.model, self.base_path, staging,
                                         self.precision.weights)  # fmt: skip
            else:
                self.model.save_pretrained(str(staging))
                self.tokenizer.save_pretrained(str(staging))
        logger.info("saved merged model to %s", path)
        return Path(path)

    def load_saved(self, adapter_path: str | Path) -> ModelManager:
        """This manager holding base + the save at ``adapter_path`` in eval mode (``Session.for_inference``)."""
        manager, config = self, self.config
        path = Path(adapter_path)
        recover_previous(path)
        if not ((path / "adapter_config.json").is_file() or (path / "config.json").is_file()):
            raise ModelError(
                f"{path}: neither an adapter (adapter_config.json) nor a model (config.json); "
                "point at a directory written by save_adapter or merge_and_save"
            )
        is_adapter = (path / "adapter_config.json").is_file()
        manager.base_path = manager._inference_base_path(path) if is_adapter else str(path)
        try:
            model, tokenizer = manager.backend.load_inference(config, manager.base_path, path,
                                                              self.precision.weights)  # fmt: skip
        except RuntimeError as exc:
            raise _misfit(path, manager.base_path, exc) from None
        manager.model, manager.tokenizer = (
            model.eval(),
            _prepare_tokenizer(model, _saved_template(tokenizer, config)),
        )
        return manager

    def _inference_base_path(self, adapter_path: Path) -> str:
        """The folder the adapter was trained on when this machine built it (a builtin, a converted GGUF) and it
        still exists; else the config's source, built or converted again if need be."""
        recorded = read_adapter_config(adapter_path).get("base_model_name_or_path")
        name = self.config.model.model_name
        built_here = name in BUILTIN_MODELS or name.endswith(".gguf")
        if built_here and recorded and Path(recorded).is_dir():
            return recorded
        return base_model_path(self.config)

    def free(self) -> None:
        """Drop the model and tokenizer, collect garbage and empty the CUDA cache.

        Callers must drop their own references (trainers, local variables) for the memory to come back; a vLLM
        engine beside the model is the ``rollout.EngineOwner``'s to shut down.
        """
        self.model = self.tokenizer = None
        free_memory()

    def _require_loaded(self) -> None:
        if self.model is None or self.tokenizer is None:
            raise RuntimeError("ModelManager: call load() (or load_saved) first")


def _saved_template(tokenizer: Any, config: PipelineConfig) -> Any:
    """A save's tokenizer keeps the template it was trained with (ours or the model's, wrapped); ours if it has none."""
    if tokenizer.chat_template:
        tokenizer.padding_side = "left"
        tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    else:
        apply_chat_template_to(tokenizer, config.prompt)
    return tokenizer


def _prepare_tokenizer(model: Any, tokenizer: Any) -> Any:
    for target in (model.config, getattr(model, "generation_config", None)):
        if target is not None and getattr(target, "pad_token_id", None) is None:
            target.pad_token_id = tokenizer.pad_token_id
    return tokenizer


def read_adapter_config(path: Path) -> dict[str, Any]:
    """An adapter folder's ``adapter_config.json``; a ``ModelError`` naming the file when it does not parse."""
    config_file = Path(path) / "adapter_config.json"
    try:
        saved = json.loads(config_file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        saved = None
    if not isinstance(saved, dict):
        raise ModelError(f"{config_file}: not a valid adapter config (corrupt or hand-edited JSON); save the adapter "
                         "again, or restore the file from the run that wrote it")  # fmt: skip
    return saved


def _misfit(path: Path, base: Any, exc: Exception) -> ModelError:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return ModelError(f"{path}: the adapter's weights do not fit the base model {base} ({reason}); load it with "
                      "the base model it was trained on (model.model_name)")  # fmt: skip


def _check_adapter_matches(path: Path, config: PipelineConfig) -> None:
    config_file = path / "adapter_config.json"
    if not config_file.is_file():
        raise ModelError(
            f"{path}: no adapter_config.json, so not a LoRA adapter; point at a save_adapter directory "
            "(or set model.lora: null to continue a full fine-tune)"
        )
    saved = read_adapter_config(path)
    lora = config.model.lora
    assert lora is not None
    saved_modules = sorted(saved.get("target_modules") or [])
    if saved.get("r") != lora.rank or saved_modules != sorted(lora.target_modules):
        raise ModelError(
            f"{path}: adapter has rank {saved.get('r')} on {saved_modules}, but model.lora asks for rank "
            f"{lora.rank} on {sorted(lora.target_modules)}; set model.lora to match the adapter"
        )
