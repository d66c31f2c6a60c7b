"""The Unsloth lane: the tiny pipeline through ``model.backend: unsloth`` with LoRA, in Unsloth's CPU mode.

    UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu pytest -m unsloth      # what CI runs (.ci/run)

Unsloth must be imported before trl/transformers, so the pipeline does not run in the pytest process: one
driver subprocess (this file run as a script) imports unsloth first, then runs the real command lines in
order: ``run_training.py`` (SFT -> GRPO -> save), ``--skip-sft`` on a copy of that run, ``infer``,
``evaluate`` and ``export --merged``, and records each exit code and output in ``lane.json``. One process
pays Unsloth's import (about 20 s of CPU) once. The tests below read that record; the adapter-portability
test then loads the Unsloth-trained adapter with the hf backend in the pytest process, which never imports
unsloth, and compares greedy output.

Where unsloth is not installed (the README's ``uv run pytest``) the lane is skipped with the reason; where
Unsloth declines to run on this machine (a release without CPU mode, or ``UNSLOTH_DISABLE_CPU_FALLBACK=1``)
too. Any other failure, an import error included, fails the lane.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SIMPLE_SUMS
from lane_driver import driver_record, passed, run_step

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny.yaml"
SFT_STEPS, GRPO_STEPS, NUM_EVAL = 40, 2, 8
LORA = (
    "model.lora={rank: 8, alpha: 16, modules_to_save: [embed_tokens], "
    "target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"
)
SHRINK = [
    f"sft_training.max_steps={SFT_STEPS}",
    "sft_training.learning_rate=5e-3",  # LoRA r=8 + the embedding learn the tag format in 40 steps at this rate
    "sft_training.save_steps=20",
    "sft_training.logging_steps=10",
    f"grpo_training.max_steps={GRPO_STEPS}",
    "grpo_training.save_steps=2",
    "evaluation.grpo_every_steps=2",
    "grpo_training.per_device_train_batch_size=8",
    "grpo_training.num_generations=4",
    "grpo_training.max_completion_length=20",
    f"evaluation.num_samples={NUM_EVAL}",
    "evaluation.sampled_k=1",
    "evaluation.batch_size=8",
    "data.synthetic.num_train=400",
    f"data.synthetic.num_eval={NUM_EVAL}",
    *SIMPLE_SUMS,  # a short completion that LoRA learns in SFT_STEPS steps
    "model.backend=unsloth",
    LORA,
]
QUESTIONS = ["What is 3 + 4?", "What is 9 + 0?", "Tom has 6 apples. He gets 2 more. How many apples does Tom have now?"]
GREEDY_TOKENS = 20
NOT_INSTALLED = (
    "unsloth is not installed here; the Unsloth lane runs in the gpu environment: "
    "UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu pytest -m unsloth"
)

pytestmark = [
    pytest.mark.unsloth,
    pytest.mark.skipif(importlib.util.find_spec("unsloth") is None, reason=NOT_INSTALLED),
]


def run_arguments(output_dir: Path, *extra: str) -> list[str]:
    overrides = [arg for item in SHRINK for arg in ("--set", item)]
    return ["--config", str(TINY), "--output-dir", str(output_dir), *overrides, *extra]


@pytest.fixture(scope="module")
def lane(tmp_path_factory) -> dict:
    """The driver's record: each step's exit code, seconds and output, plus the Unsloth backend's greedy output."""
    root = tmp_path_factory.mktemp("unsloth_lane")
    return driver_record(__file__, root, timeout=1200, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def test_unsloth_backend_runs_sft_then_grpo_and_saves_the_adapter(lane):
    passed(lane, "run")
    run_dir = lane["root"] / "run"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["backend"] == "unsloth" and "CPU mode" in summary["backend_reason"]
    assert summary["complete"] is True
    assert summary["phases"]["sft"]["steps"] == SFT_STEPS and summary["phases"]["grpo"]["steps"] == GRPO_STEPS
    assert summary["versions"]["unsloth"] and summary["eval"]["after_grpo"] is not None
    assert summary["eval"]["after_sft"]["format_accuracy"] >= 0.5 > summary["eval"]["before_sft"]["format_accuracy"]
    saved = json.loads((run_dir / "grpo_saved_lora" / "adapter_config.json").read_text())
    assert saved["r"] == 8 and len(saved["target_modules"]) == 7
    assert "embed_tokens" in saved["modules_to_save"]  # a trained embedding copy works with Unsloth


def test_unsloth_trains_through_its_cpu_mode_and_says_why_vllm_is_off(lane):
    log = (lane["root"] / "run" / "training.log").read_text()
    assert "model backend: unsloth (model.backend: unsloth was asked for; no CUDA GPU" in log
    notice = [line for line in log.splitlines() if "Unsloth's vLLM engine cannot start: no CUDA GPU" in line]
    assert len(notice) == 1 and "installed but cannot load without a CUDA driver" in notice[0]
    grpo = [json.loads(line) for line in (lane["root"] / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any(r["phase"] == "grpo" and "reward" in r for r in grpo)
    assert lane["sft_trainer_is_unsloths"] is True  # CPU mode swapped trl.SFTTrainer for its subclass


def test_skip_sft_continues_from_the_unsloth_sft_adapter_with_guidance(lane):
    passed(lane, "skip_sft")
    first = json.loads((lane["root"] / "run" / "summary.json").read_text())
    second = json.loads((lane["root"] / "skip_sft" / "summary.json").read_text())
    assert second["phases"]["sft"].get("skipped") is True
    assert second["phases"]["grpo"]["steps"] == GRPO_STEPS
    for greedy in ("format_accuracy", "answer_accuracy", "avg_reasoning_length"):  # same SFT weights, greedy
        assert second["eval"]["after_sft"][greedy] == first["eval"]["after_sft"][greedy]
    steps = [json.loads(line) for line in (lane["root"] / "skip_sft" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in steps if r["phase"] == "grpo" and "reward" in r]  # logged every 5 steps: the last one
    assert steps and all("groups/guided" in r for r in steps)  # guidance reached Unsloth's compiled trainer
    assert all(r["groups/all_wrong"] == 0 for r in steps)  # and filled every all-wrong group


def test_infer_evaluate_and_merged_export_run_on_the_unsloth_backend(lane):
    answer = passed(lane, "infer")["output"]
    assert "reasoning:" in answer and "answer:" in answer
    passed(lane, "evaluate")
    metrics = json.loads((lane["root"] / "eval" / "metrics.json").read_text())
    assert metrics["n"] == NUM_EVAL and metrics["adapter"].endswith("grpo_saved_lora")  # the held-out problems
    assert f"merged: {lane['root'] / 'merged'}" in passed(lane, "export")["output"]
    merged = lane["root"] / "merged"
    assert (merged / "config.json").is_file() and list(merged.glob("*.safetensors"))
    assert not (merged / "adapter_config.json").exists()


def test_merged_export_loads_with_plain_transformers(lane):
    import torch
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(str(lane["root"] / "merged"))
    assert not hasattr(merged, "peft_config")
    # Unsloth's merged_16bit writes 16-bit weights even from an fp32 model (the hf backend keeps fp32).
    assert merged.dtype in (torch.bfloat16, torch.float16)


def test_an_adapter_trained_with_unsloth_loads_with_hf_and_gives_the_same_greedy_output(lane):
    import torch

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings, generate_completions
    from llm_finetuning.session import Session

    assert "unsloth" not in sys.modules  # this side is plain transformers + peft
    run_dir = lane["root"] / "run"
    config = PipelineConfig.from_yaml(run_dir / "config.yaml", ["model.backend=hf"])
    manager = Session.for_inference(config, run_dir / "grpo_saved_lora").manager
    assert manager.backend.name == "hf"
    prompts = [conversation(config.prompt.system_prompt, question) for question in QUESTIONS]
    greedy = SamplingSettings(greedy=True, max_new_tokens=GREEDY_TOKENS)
    with_hf = [completion for (completion,) in generate_completions(manager.model, manager.tokenizer, prompts, greedy)]
    logits = _logits(manager.model, manager.tokenizer)
    with manager.model.disable_adapter():
        base = [completion for (completion,) in generate_completions(manager.model, manager.tokenizer, prompts, greedy)]
    manager.free()
    assert with_hf == lane["unsloth_greedy"]
    assert all(text.strip() for text in with_hf)
    assert with_hf != base  # the adapter changes the output, so the comparison is not vacuous
    torch.testing.assert_close(logits, torch.load(lane["root"] / "unsloth_logits.pt"), atol=1e-5, rtol=1e-5)


def test_unsloths_compiled_grpo_config_keeps_every_setting_the_project_passes(tmp_path):
    # Unsloth's compiled GRPOConfig (what trl.GRPOConfig is on CUDA) against TRL's own, built from the project's
    # arguments for each backend, every loss type, with and without vLLM. Two differences are expected: activation
    # checkpointing (the unsloth backend passes False because Unsloth checkpoints inside get_peft_model) and, with
    # an engine and the default min_p, the importance-sampling correction: one rule, whose outcome follows what
    # each engine can report (TRL's is told to report raw log-probs; Unsloth's reports processed ones, so off).
    result = tmp_path / "differences.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    probe = subprocess.run([sys.executable, str(ROOT / "tests" / "unsloth_grpo_config_probe.py"), str(result)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                           check=False)  # fmt: skip  (Unsloth writes its compiled trainers into the cwd)
    assert probe.returncode == 0, probe.stderr[-3000:]
    differences = json.loads(result.read_text())
    assert {d["setting"] for d in differences} == {"gradient_checkpointing", "vllm_importance_sampling_correction"}
    assert all((d["unsloth"], d["trl"]) == (False, True) for d in differences)
    assert all(d["use_vllm"] for d in differences if d["setting"] == "vllm_importance_sampling_correction")


def test_the_same_config_records_the_same_grpo_and_sft_settings_on_both_backends(lane, tmp_path):
    from llm_finetuning.tools import train as cli

    unsloth_run = json.loads((lane["root"] / "run" / "summary.json").read_text())
    hf_dir = tmp_path / "hf"
    arguments = run_arguments(hf_dir, "--set", "model.backend=hf")
    assert cli.main(arguments) == 0
    hf_run = json.loads((hf_dir / "summary.json").read_text())
    for phase in ("sft", "grpo"):
        unsloth_settings, hf_settings = unsloth_run["phases"][phase]["settings"], hf_run["phases"][phase]["settings"]
        assert unsloth_settings and unsloth_settings == hf_settings
    assert hf_run["phases"]["grpo"]["settings"]["optim"] == "adamw_torch_fused"  # Unsloth's CPU mode's choice


def _logits(model, tokenizer):
    import torch

    inputs = tokenizer(QUESTIONS, return_tensors="pt", padding=True)
    with torch.no_grad():
        return model(**inputs).logits


def drive(root: Path) -> dict:
    """The lane in one process: import unsloth first, then every command line in pipeline order."""
    started = time.perf_counter()
    try:
        import unsloth  # noqa: F401 - first, before anything imports trl or transformers
    except NotImplementedError as exc:  # a release without CPU mode, or UNSLOTH_DISABLE_CPU_FALLBACK=1
        return {"declined": str(exc).splitlines()[0]}
    record: dict = {"import_seconds": round(time.perf_counter() - started, 1), "steps": {}}
    from llm_finetuning.tools import evaluate, export, infer
    from llm_finetuning.tools import train as cli

    steps, run_dir, copy = record["steps"], root / "run", root / "skip_sft"
    steps["run"] = run_step(cli.main, run_arguments(run_dir))
    if steps["run"]["rc"] != 0:
        return record
    shutil.copytree(run_dir, copy)
    steps["skip_sft"] = run_step(cli.main, run_arguments(copy, "--skip-sft", "--set", "grpo_training.guidance=true"))
    config, adapter = str(run_dir / "config.yaml"), str(run_dir / "grpo_saved_lora")
    steps["infer"] = run_step(infer.main, ["--config", config, QUESTIONS[0]])
    steps["evaluate"] = run_step(evaluate.main, ["--config", config, "--adapter", adapter,
                                                  "--output-dir", str(root / "eval")])  # fmt: skip
    steps["export"] = run_step(export.main, ["--config", config, "--adapter", adapter,
                                              "--merged", str(root / "merged")])  # fmt: skip
    record["unsloth_greedy"] = _unsloth_outputs(Path(config), Path(adapter), root / "unsloth_logits.pt")
    import trl

    record["sft_trainer_is_unsloths"] = getattr(trl.SFTTrainer, "_unsloth_cpu", False)
    record["seconds"] = round(time.perf_counter() - started, 1)
    return record


def _unsloth_outputs(config_path: Path, adapter: Path, logits_file: Path) -> list[str]:
    """Greedy completions of QUESTIONS through the Unsloth backend; the logits go to ``logits_file``."""
    import torch

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings, generate_completions
    from llm_finetuning.tools.common import load_model

    config = PipelineConfig.from_yaml(config_path)
    loaded = load_model(config, adapter)
    manager = loaded.manager
    assert manager.backend.name == "unsloth"
    prompts = [conversation(config.prompt.system_prompt, question) for question in QUESTIONS]
    greedy = SamplingSettings(greedy=True, max_new_tokens=GREEDY_TOKENS)
    completions = generate_completions(manager.model, manager.tokenizer, prompts, greedy)
    torch.save(_logits(manager.model, manager.tokenizer), logits_file)
    loaded.free()
    return [completion for (completion,) in completions]


if __name__ == "__main__":
    lane_root = Path(sys.argv[1])
    (lane_root / "lane.json").write_text(json.dumps(drive(lane_root), indent=1))
