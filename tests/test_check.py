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
