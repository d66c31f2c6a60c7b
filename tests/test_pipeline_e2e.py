"""The whole pipeline on the tiny model through TRL's real trainers: outputs, resume, --skip-sft, handover.

These train for real on CPU (a shrunken demo: smaller model, fewer steps, fewer held-out problems), so they
are marked slow; CI runs them all the same (`uv run pytest`). Deselect locally with `-m "not slow"`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest
from conftest import ROOT, TEST_SCHEDULE, TINY_YAML, demo_config

from llm_finetuning.config import PipelineConfig
from llm_finetuning.pipeline import RunOptions, run
from llm_finetuning.reporting.run_outputs import format_table
from llm_finetuning.sandbox.confine import available_layers
from llm_finetuning.training.arguments import GRPO_SETTINGS, SFT_SETTINGS

EVAL_KEYS = {"n", "format_accuracy", "answer_accuracy", "sampled_answer_accuracy", "reasoning_present",
             "avg_reasoning_length", "avg_total_reward"}

pytestmark = pytest.mark.slow


def tiny_config(output_dir: Path, *extra: str) -> PipelineConfig:
    """The demo itself (its model size) on the test schedule: the run the README promises, shortened."""
    return demo_config(output_dir, *TEST_SCHEDULE, *extra)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("tiny_run")
    summary = run(tiny_config(output_dir), RunOptions())
    return output_dir, summary


def test_run_writes_every_output(finished_run):
    output_dir, summary = finished_run
    for name in ("training.log", "config.yaml", "metrics.jsonl", "summary.json", "plots/training.png",
                 "report.html", "sft/final", "grpo_saved_lora"):
        assert (output_dir / name).exists(), name
    on_disk = json.loads((output_dir / "summary.json").read_text())
    assert on_disk["eval"] == summary["eval"]
    for key in ("before_sft", "after_sft", "after_grpo"):
        assert set(summary["eval"][key]) == EVAL_KEYS
    assert summary["phases"]["sft"]["steps"] == 120
    assert summary["phases"]["grpo"]["steps"] == 4
    assert summary["save_path"] == str((output_dir / "grpo_saved_lora").resolve())
    assert summary["backend"] == "hf"
    assert summary["engine"] == "hf" and summary["engine_reason"].startswith("auto: ")  # on a CPU vLLM is opt-in
    assert {"torch", "trl", "transformers"} <= set(summary["versions"])
    assert summary["sandbox"] == available_layers()  # the kernel layers the verifier workers confine themselves with
    assert set(summary["cpu"]) == {"model", "flags", "torch_capability", "threads"}  # what decides CPU numerics
    grpo = summary["phases"]["grpo"]["settings"]  # as the built trainer used them, after every rewrite
    assert set(grpo) == set(GRPO_SETTINGS) and set(summary["phases"]["sft"]["settings"]) == set(SFT_SETTINGS)
    assert (grpo["loss_type"], grpo["epsilon_high"], grpo["num_generations"], grpo["optim"]) == (
        "dapo", 0.2, 4, "adamw_torch_fused")
    assert grpo["use_vllm"] is False and grpo["bf16"] is False and grpo["reward_weights"] == [1.0, 1.0, 1.0, 1.0]
    assert summary["seconds_total"] > 0 and summary["complete"] is True
    memory = summary["memory"]  # each part's peak, this process and its children
    assert set(memory["peak_rss_gib"]) == {"load", "sft", "grpo", "evaluation"}
    assert all(0.1 < peak <= memory["main_process_peak_gib"] + 1 for peak in memory["peak_rss_gib"].values())
    assert memory["heap_trimmed_every_s"] == 1.0  # the default: the C heap's free pages handed back every second
    assert memory["onednn_primitive_cache"] == 64  # the run bounds what oneDNN keeps (runtime/heap.py)
    assert "(peak memory in GiB, this process and its children: loading " in format_table(summary)  # the console's


def test_every_stage_records_the_same_problems_sample_answers(finished_run):
    output_dir, summary = finished_run
    stages = summary["samples"]
    indices = [[sample["index"] for sample in stages[key]] for key in ("before_sft", "after_sft", "after_grpo")]
    assert indices == [[0, 1, 2]] * 3  # evaluation.sample_answers: 3, the same problems at every stage
    assert len({tuple(s["question"] for s in stages[key]) for key in stages}) == 1
    formatted = stages["after_sft"][0]
    assert formatted["completion"] and formatted["answer"] is not None and formatted["formatted"] is True
    assert set(formatted["rewards"]) == {"match_format_exactly", "match_format_approximately", "check_answer",
                                         "check_numbers"}
    page = (output_dir / "report.html").read_text()
    assert page.count('<div class="problem">') == 3 and "data:image/png;base64," in page


def test_sft_teaches_the_format(finished_run):
    _, summary = finished_run
    before, after = summary["eval"]["before_sft"], summary["eval"]["after_sft"]
    assert before["format_accuracy"] < 0.2
    assert after["format_accuracy"] >= 0.8
    assert after["format_accuracy"] > before["format_accuracy"]


def test_metrics_hold_grpo_signals_and_evaluations(finished_run):
    output_dir, _ = finished_run
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    phases = {r["phase"] for r in records}
    assert {"sft", "grpo", "eval"} <= phases
    grpo = [r for r in records if r["phase"] == "grpo"]
    assert any("frac_reward_zero_std" in r for r in grpo)
    assert any("rewards/check_answer/mean" in r for r in grpo)
    stages = [r["stage"] for r in records if r["phase"] == "eval"]
    assert stages[0] == "before_sft" and "after_sft" in stages and stages[-1] == "after_grpo"
    assert "grpo_step_2" in stages
    samples = [(r["stage"], r["index"]) for r in records if r["phase"] == "sample"]
    assert samples == [(stage, index) for stage in stages for index in range(3)]  # each evaluation's answers


def test_saved_adapter_reloads_and_generates(finished_run):
    from llm_finetuning.rollout import SamplingSettings, generate_completions
    from llm_finetuning.session import Session

    output_dir, _ = finished_run
    config = tiny_config(output_dir)
    manager = Session.for_inference(config, output_dir / "grpo_saved_lora").manager
    question = [{"role": "user", "content": "What is 34 + 48?"}]
    (completion,), = generate_completions(manager.model, manager.tokenizer, [question],  # the working: ~28 tokens
                                         SamplingSettings(greedy=True, max_new_tokens=48))
    assert config.prompt.solution_start in completion
    manager.free()


def _wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def _cli(output_dir: Path, *extra: str) -> list[str]:
    overrides = [arg for item in TEST_SCHEDULE for arg in ("--set", item)]
    return [sys.executable, str(ROOT / "run_training.py"), "--config", str(TINY_YAML), "--output-dir", str(output_dir),
            *overrides, *extra]


def test_sigterm_then_resume_finishes_the_run(tmp_path):
    more_steps = ["--set", "grpo_training.max_steps=12", "--set", "sft_training.max_steps=10"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(_cli(tmp_path, *more_steps), cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marker = tmp_path / "grpo" / "checkpoint-2" / "checkpoint_complete.json"
    try:
        _wait_for(marker.exists, timeout=400)
    finally:
        process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert "--resume" in stderr.splitlines()[-1]
    interrupted = json.loads((tmp_path / "summary.json").read_text())
    assert interrupted["complete"] is False and interrupted["eval"]["after_sft"] is not None

    half_written = tmp_path / "grpo" / "checkpoint-999"  # a save that died: no completion marker
    half_written.mkdir()
    (half_written / "trainer_state.json").write_text("{")
    resumed = subprocess.run(_cli(tmp_path, *more_steps, "--resume"), cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["phases"]["grpo"]["steps"] == 12
    resumed_from = summary["phases"]["grpo"]["resumed_from"]
    assert "checkpoint-" in resumed_from and not resumed_from.endswith("checkpoint-999")
    assert summary["phases"]["sft"] == interrupted["phases"]["sft"]  # SFT had finished: not run again
    assert summary["eval"]["before_sft"] == interrupted["eval"]["before_sft"]
    assert summary["samples"]["before_sft"] == interrupted["samples"]["before_sft"]  # kept, not generated again
    assert summary["eval"]["after_grpo"] is not None and summary["samples"]["after_grpo"]
    assert "<th>after GRPO</th><td><pre>" in (tmp_path / "report.html").read_text()  # rewritten on completion


def test_skip_grpo_stops_after_sft(tmp_path):
    summary = run(tiny_config(tmp_path, "sft_training.max_steps=5"), RunOptions(skip_grpo=True))
    assert (tmp_path / "sft" / "final").is_dir()
    assert summary["eval"]["after_sft"] is not None and summary["eval"]["after_grpo"] is None
    assert summary["phases"]["grpo"]["steps"] == 0
    assert not (tmp_path / "grpo_saved_lora").exists()


def test_skip_sft_continues_from_the_saved_sft_adapter(finished_run, tmp_path):
    source, first = finished_run
    shutil.copytree(source, tmp_path, dirs_exist_ok=True)
    second = run(tiny_config(tmp_path), RunOptions(skip_sft=True))
    # GRPO step 0 of the second run scores exactly what the first run's SFT produced (greedy is deterministic)
    assert second["eval"]["after_sft"]["format_accuracy"] == first["eval"]["after_sft"]["format_accuracy"]
    assert second["eval"]["after_sft"]["answer_accuracy"] == first["eval"]["after_sft"]["answer_accuracy"]
    assert second["phases"]["sft"].get("skipped") is True
    # the GRPO trainer reseeds from config.seed, so the same seed repeats GRPO's numbers exactly
    assert second["eval"]["after_grpo"] == first["eval"]["after_grpo"]


def test_sft_from_a_trained_adapter_continues_from_its_weights(finished_run, tmp_path):
    """sft_training.init_adapter: one step at a negligible learning rate keeps the trained adapter's figures; the
    same step from a fresh adapter (the control) has not learned the format."""
    source, first = finished_run
    one_step = ["sft_training.max_steps=1", "sft_training.learning_rate=1e-12", "evaluation.eval_before_sft=false"]
    more = run(tiny_config(tmp_path / "more", *one_step, f"sft_training.init_adapter={source / 'sft' / 'final'}"),
               RunOptions(skip_grpo=True))  # fmt: skip
    assert more["eval"]["after_sft"]["answer_accuracy"] == first["eval"]["after_sft"]["answer_accuracy"]
    assert more["eval"]["after_sft"]["format_accuracy"] == first["eval"]["after_sft"]["format_accuracy"] >= 0.8
    fresh = run(tiny_config(tmp_path / "fresh", *one_step), RunOptions(skip_grpo=True))
    assert fresh["eval"]["after_sft"]["format_accuracy"] < 0.2


def test_sft_trainer_is_freed_after_the_phase(tmp_path):
    from llm_finetuning.data import load_sft_data
    from llm_finetuning.reporting.run_outputs import MetricsWriter
    from llm_finetuning.session import Session
    from llm_finetuning.session.plan import RunPlan
    from llm_finetuning.training.sft import SFTPhase

    config = tiny_config(tmp_path, "sft_training.max_steps=2")
    manager = Session.open(config).manager
    manager.load()
    plan = RunPlan.resolve(config, manager.backend).with_model(config, manager.model)
    phase = SFTPhase(config, plan, manager, load_sft_data(config, manager.tokenizer), MetricsWriter(tmp_path / "m.jsonl"))
    phase.run()
    assert isinstance(phase.trainer_ref, weakref.ref)
    assert phase.trainer_ref() is None
