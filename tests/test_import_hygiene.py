"""Unsloth patches transformers/trl/peft when it is imported, so it must be imported first or not at all.

A fake ``unsloth`` package that records its own import sits on the path of a fresh interpreter: importing
the whole package on a CPU machine must never import it, while a machine where CUDA is available (simulated)
does import it when the backend is chosen, which shows the check can see an import at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

MODULES = [
    "llm_finetuning",
    "llm_finetuning.cli",
    "llm_finetuning.pipeline",
    "llm_finetuning.model",
    "llm_finetuning.data",
    "llm_finetuning.evaluation.evaluator",
    "llm_finetuning.generation",
    "llm_finetuning.rewards",
    "llm_finetuning.tools.evaluate",
    "llm_finetuning.tools.infer",
    "llm_finetuning.tools.export",
    "llm_finetuning.tools.debug_grpo",
]


def run_with_fake_unsloth(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "fake" / "unsloth"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import os, pathlib\npathlib.Path(os.environ['UNSLOTH_IMPORT_RECORD']).write_text('imported')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")]),
        "UNSLOTH_IMPORT_RECORD": str(tmp_path / "record"),
        "CUDA_VISIBLE_DEVICES": "",  # a CPU machine, also where a GPU is present
    }
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_importing_every_module_on_cpu_never_imports_unsloth_or_vllm(tmp_path):
    result = run_with_fake_unsloth(tmp_path, f"""
        import importlib, sys
        for name in {MODULES!r}:
            importlib.import_module(name)
        from llm_finetuning.config import ModelConfig
        from llm_finetuning.model import choose_backend
        print(choose_backend(ModelConfig())[0])
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("unsloth", "vllm", "unsloth_zoo")))
        """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["hf", "[]"]
    assert not (tmp_path / "record").exists()


def test_the_fake_unsloth_is_seen_when_cuda_makes_the_backend_import_it(tmp_path):
    result = run_with_fake_unsloth(tmp_path, """
        import torch
        torch.cuda.is_available = lambda: True
        from llm_finetuning.config import ModelConfig
        from llm_finetuning.model import choose_backend
        print(choose_backend(ModelConfig(model_name="some/model"))[0])
        """)
    assert (tmp_path / "record").read_text() == "imported", result.stderr[-2000:]
