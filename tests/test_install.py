"""The package as a user installs it: the built wheel into a fresh virtual environment in a temporary folder outside
the repository, then ``llm-finetune train`` on a shipped config (by name) and ``llm-finetune eval`` on its adapter,
run from that folder. Marked ``install`` (CI runs it with the fault-injection suite): it builds a wheel and installs
the locked versions of every dependency (from uv's cache, linked, where an earlier sync filled it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.install

SHORT = ["sft_training.max_steps=20", "sft_training.save_steps=10", "grpo_training.max_steps=2",
         "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
         "grpo_training.max_completion_length=16", "evaluation.num_samples=8", "evaluation.sampled_k=1",
         "data.synthetic.num_eval=8", "model.tiny.hidden_size=32", "model.tiny.num_hidden_layers=2",
         "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=1", "model.tiny.intermediate_size=64"]  # fmt: skip


def uv(*args: str, cwd=ROOT, timeout: int = 900) -> subprocess.CompletedProcess:
    found = shutil.which("uv")
    if found is None:
        pytest.skip("uv is not installed: the install test builds and installs with it")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    return subprocess.run([found, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=True)  # fmt: skip


def test_the_wheel_installs_and_trains_and_evaluates_from_any_folder(tmp_path):
    dist, venv, work = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    work.mkdir()
    uv("build", "--wheel", "--out-dir", str(dist))
    wheel = next(dist.glob("llm_finetuning-*.whl"))
    constraints = tmp_path / "locked.txt"
    constraints.write_text(uv("export", "--no-hashes", "--no-dev", "--frozen", "--format", "requirements-txt",
                              "--no-emit-project").stdout)  # fmt: skip
    uv("venv", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    uv("pip", "install", "--python", str(python), "--link-mode", "hardlink", "-c", str(constraints), str(wheel))
    command = venv / "bin" / "llm-finetune"
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    env.pop("PYTHONPATH", None)
    sets = [arg for item in SHORT for arg in ("--set", item)]
    trained = subprocess.run([str(command), "train", "--config", "tiny", "--output-dir", "run", *sets], cwd=work,
                             env=env, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (work / "run" / "grpo_saved_lora" / "README.md").is_file()  # its model card
    evaluated = subprocess.run([str(python), "-m", "llm_finetuning", "eval", "--config", "run/config.yaml",
                                "--adapter", "run/grpo_saved_lora", "--output-dir", "scores"], cwd=work, env=env,
                               capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert (work / "scores" / "results.jsonl").is_file() and (work / "scores" / "metrics.json").is_file()
    installed = subprocess.run([str(python), "-c", "import llm_finetuning; print(llm_finetuning.__file__)"],
                               cwd=work, env=env, capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert str(venv) in installed and str(ROOT) not in installed  # the wheel's copy ran, not the checkout
