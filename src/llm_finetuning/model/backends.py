"""The backend registry and the rule that picks one backend for a run (``Backend`` in ``backend.py``).

- ``unsloth``: Unsloth's ``FastLanguageModel`` (fused kernels, 4-bit QLoRA, a vLLM engine built with the model
  for GRPO's rollouts) on a CUDA GPU; needs the ``gpu`` extra. Asked for explicitly on a machine without CUDA,
  it runs in Unsloth's CPU mode (stock transformers + peft + TRL underneath, no vLLM engine): that is how CI
  executes this backend.
- ``hf``: plain transformers + peft. Runs anywhere; on CUDA it uses bf16 (and bitsandbytes for 4-bit).

``choose_backend`` is cheap on a CPU machine unless ``unsloth`` is asked for: ``auto`` imports unsloth only
when CUDA is available, because unsloth must be imported before trl/transformers (``UnslothBackend.prepare``)
and, on a CPU, importing it switches TRL's trainers to its CPU mode. Constructing a backend imports nothing
heavy: the libraries load when the model does.

    >>> choose_backend(ModelConfig(backend="auto"))     # doctest: +SKIP
    HFBackend: auto: no CUDA GPU, so transformers + peft (backend: unsloth runs Unsloth's CPU mode)
"""

from __future__ import annotations

from ..config import ModelConfig, PipelineConfig
from ..errors import ModelError
from ..runtime.hardware import Machine
from .backend import Backend
from .hf_backend import HFBackend
from .tiny import TINY_MODEL_NAME
from .unsloth_backend import UnslothBackend

__all__ = ["BACKENDS", "backend_on_cuda", "choose_backend", "get_backend"]

BACKENDS: dict[str, type[Backend]] = {"hf": HFBackend, "unsloth": UnslothBackend}


def get_backend(name: str, reason: str = "", machine: Machine | None = None) -> Backend:
    """The backend registered under ``name``, on ``machine`` (default: this one, probed now)."""
    if name not in BACKENDS:
        raise ModelError(f"model.backend: unknown backend {name!r}; valid: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[name](reason, machine)


def choose_backend(model_config: ModelConfig, machine: Machine | None = None) -> Backend:
    """The backend for ``machine`` (default: this one, probed now), with the reason; a ModelError for a choice
    that cannot run there."""
    machine = machine or Machine.probe()
    if model_config.load_in_4bit and not machine.cuda:
        raise ModelError(
            "model.load_in_4bit needs a CUDA GPU (bitsandbytes); set load_in_4bit: false on this machine"
        )
    if model_config.backend != "auto":
        backend_class = BACKENDS[model_config.backend]
        problem = backend_class.import_problem()
        if problem:
            raise ModelError(
                f"model.backend: {backend_class.name} cannot be imported ({problem}); "
                "install the gpu extra (uv sync --extra gpu) or use backend: hf"
            )
        return backend_class(machine=machine)
    if not machine.cuda:
        return HFBackend("auto: no CUDA GPU, so transformers + peft (backend: unsloth runs Unsloth's CPU mode)",
                         machine)
    backend_class, reason = _auto_on_cuda(model_config)
    problem = backend_class.import_problem()
    if problem:
        return HFBackend(
            f"auto: CUDA is available but {backend_class.name} cannot be imported ({problem}); using transformers + peft",
            machine,
        )
    return backend_class(reason, machine)


def _auto_on_cuda(model_config: ModelConfig) -> tuple[type[Backend], str]:
    """``auto``'s pick on a CUDA GPU, before checking that the library imports."""
    if model_config.model_name == TINY_MODEL_NAME:
        return HFBackend, "auto: the builtin tiny model runs on transformers + peft (unsloth/vLLM target real models)"
    return UnslothBackend, "auto: CUDA is available and unsloth imports"


def backend_on_cuda(config: PipelineConfig) -> Backend:
    """The backend a CUDA machine with the gpu extra installed would run (the memory estimate's backend)."""
    gpu_machine = Machine(cuda=True, vllm_problem=None)
    if config.model.backend != "auto":
        return get_backend(config.model.backend, machine=gpu_machine)
    backend_class, reason = _auto_on_cuda(config.model)
    return backend_class(reason, gpu_machine)
