"""check.py on a CPU-only machine: exit 0, say that no CUDA GPU was found and which backend runs."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_check_on_cpu_names_the_backend():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # a CPU machine, also on a GPU host
    result = subprocess.run([sys.executable, "check.py"], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=180, check=False)
    assert result.returncode == 0, result.stderr
    assert "no CUDA GPU found" in result.stdout
    assert "backend (auto)           hf:" in result.stdout
    assert "trl" in result.stdout and "not installed" in result.stdout
