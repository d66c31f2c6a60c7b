"""check.py on a CPU-only machine: exit 0, say that no CUDA GPU was found, which backend runs, and each package."""

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _installed(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def test_check_on_cpu_names_the_backend():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # a CPU machine, also on a GPU host
    result = subprocess.run([sys.executable, "check.py"], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=180, check=False)
    assert result.returncode == 0, result.stderr
    assert "no CUDA GPU found" in result.stdout
    assert "backend (auto)           hf:" in result.stdout
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines() if line and not line[0].isspace()
                and len(line.split(None, 1)) == 2)  # fmt: skip
    for name in ("trl", "unsloth", "vllm", "bitsandbytes"):  # installed or not: the row says which
        assert rows[name].strip() == _installed(name), name


def test_check_estimates_each_phase_for_the_gpu_size_given_and_names_the_first_change():
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.tools.check import memory_rows

    config = PipelineConfig.from_yaml(ROOT / "configs" / "default_config.yaml")
    fits = memory_rows(config, "80GiB")
    assert fits[0][0] == "GPU memory (80 GiB, unsloth)"
    assert [value.split(":")[0] for _, value in fits] == ["sft", "grpo", "fits"]
    small = memory_rows(config.with_overrides(["grpo_training.vllm_gpu_memory_utilization=0.9"]), "8GiB")
    assert small[-1][1].startswith("does not fit; first change: --set ")
    (bad,) = memory_rows(config, "lots")
    assert bad == ("GPU memory (estimate)", "--gpu-memory 'lots': give a size such as 24GiB, 80GB or 16 (GiB)")


def test_check_on_cpu_without_a_size_says_how_to_estimate(monkeypatch):
    import torch

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.tools.check import memory_rows

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (row,) = memory_rows(PipelineConfig(), None)
    assert "give --gpu-memory 24GiB" in row[1]
