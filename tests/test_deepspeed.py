"""DeepSpeed ZeRO-2/3 executed on a CPU: DeepSpeed's CPU accelerator runs ZeRO over gloo between 2 processes.

The same ``configs/accelerate/zero{2,3}.yaml`` a GPU cluster uses, launched with ``--num_processes 2
--mixed_precision no``: ZeRO-3 partitions the weights as they load, trains SFT → GRPO, gathers them to save
and to evaluate, and reloads a saved full model into partitioned weights (``--skip-sft``); ZeRO-3 with LoRA
and ZeRO-2 run the pipeline too. Every config is also parsed by DeepSpeed's own config class, with the
``auto`` values filled the way transformers fills them. What never runs here — NCCL, CUDA kernels, offload
to NVMe, several machines — is listed in docs/gpu.md.

Its own CI lane, in an environment with the ``deepspeed`` extra (kept out of the README's):

    UV_PROJECT_ENVIRONMENT=.venv-deepspeed uv run --extra deepspeed pytest -m deepspeed
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from unittest import mock

import pytest
from conftest import GREEDY_FIGURES, ROOT, SIMPLE_SUMS, evaluate_alone, launch_command, launch_env, plan_for

pytestmark = [pytest.mark.slow, pytest.mark.deepspeed]
deepspeed = pytest.importorskip("deepspeed")

CONFIGS = ROOT / "configs" / "accelerate"
ON_CPU = ["--num_processes", "2", "--mixed_precision", "no", "--main_process_port", "0"]
SCHEDULE = [  # the demo's model, shortened; enough SFT that completions have a format to compare
    "sft_training.max_steps=60", "sft_training.learning_rate=3e-3", "sft_training.save_steps=30",
    "sft_training.logging_steps=20", "data.synthetic.num_train=1000",
    "grpo_training.max_steps=4", "grpo_training.save_steps=2", "evaluation.grpo_every_steps=2",
    "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
    "grpo_training.max_completion_length=20",
    "evaluation.num_samples=24", "evaluation.sampled_k=2", "evaluation.batch_size=5",  # uneven shares: lockstep
    "data.synthetic.num_eval=24",
    *SIMPLE_SUMS,
]
LORA_MODULES = "[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]"
LORA = [f"model.lora={{rank: 8, alpha: 16, target_modules: {LORA_MODULES}}}", "sft_training.learning_rate=5e-3"]


def _launch(zero: str, output_dir: Path, *extra: str, overrides: list[str] = SCHEDULE) -> dict:
    command = launch_command(CONFIGS / f"{zero}.yaml", output_dir, overrides, *extra, launch_flags=ON_CPU)
    result = subprocess.run(command, cwd=ROOT, env=launch_env(), capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return json.loads((output_dir / "summary.json").read_text())


@pytest.fixture(scope="module")
def zero3_run(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("zero3")
    return output_dir, _launch("zero3", output_dir)


def test_zero3_partitions_at_load_and_runs_both_phases(zero3_run):
    _, summary = zero3_run
    assert summary["processes"] == {"num_processes": 2, "launcher": "accelerate", "zero_stage": 3,
                                    "weights_partitioned": True}
    assert summary["complete"] is True
    assert (summary["phases"]["sft"]["steps"], summary["phases"]["grpo"]["steps"]) == (60, 4)
    assert "weight_checksums" not in summary["phases"]["grpo"]  # partitions, not replicas: nothing to compare


def test_zero3_saves_the_gathered_weights_and_evaluates_them(zero3_run):
    output_dir, summary = zero3_run
    alone = evaluate_alone(output_dir, "grpo_saved_lora")  # the save holds every weight, whole
    assert alone == {key: summary["eval"]["after_grpo"][key] for key in GREEDY_FIGURES}
    assert alone["format_accuracy"] > 0


def test_zero3_continues_from_a_saved_model_into_partitioned_weights(zero3_run, tmp_path):
    output_dir, first = zero3_run
    again = _launch("zero3", output_dir, "--skip-sft", "--set", "grpo_training.max_steps=2",
                    "--set", f"grpo_training.save_path={tmp_path / 'second'}")
    # sft/final loaded into the partitioned model scores exactly as it did right after SFT (greedy; samples
    # come from another random stream)
    assert {key: again["eval"]["after_sft"][key] for key in GREEDY_FIGURES} == {
        key: first["eval"]["after_sft"][key] for key in GREEDY_FIGURES}
    assert again["phases"]["sft"]["skipped"] is True and again["phases"]["grpo"]["steps"] == 2


def test_zero3_with_lora_saves_an_adapter_that_reloads(tmp_path):
    summary = _launch("zero3", tmp_path, overrides=[*SCHEDULE, *LORA])
    assert summary["complete"] is True and summary["processes"]["weights_partitioned"] is True
    assert (tmp_path / "grpo_saved_lora" / "adapter_config.json").is_file()
    assert evaluate_alone(tmp_path, "grpo_saved_lora") == {
        key: summary["eval"]["after_grpo"][key] for key in GREEDY_FIGURES}


def test_zero2_keeps_replicas_in_sync(tmp_path):
    summary = _launch("zero2", tmp_path, "--skip-grpo", overrides=[*SCHEDULE, *LORA, "evaluation.enabled=false"])
    assert summary["processes"] == {"num_processes": 2, "launcher": "accelerate", "zero_stage": 2,
                                    "weights_partitioned": False}
    assert (tmp_path / "sft" / "final" / "adapter_config.json").is_file()
    checksums = summary["phases"]["sft"]["weight_checksums"]
    assert len(checksums) == 2 and checksums[0] == checksums[1]


@pytest.mark.parametrize("config", sorted(CONFIGS.glob("zero*.yaml")), ids=lambda path: path.stem)
def test_deepspeed_parses_every_config_as_the_trainer_fills_it(config, tiny_config):
    """accelerate's launch environment → its DeepSpeedPlugin → transformers fills `auto` → DeepSpeedConfig."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers import AutoModelForCausalLM
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
    from trl import SFTConfig

    from llm_finetuning.model.sources import base_model_path
    from llm_finetuning.training.arguments import sft_arguments

    flags = ["--machine_rank", "1", "--main_process_ip", "10.1.2.3"] if "multinode" in config.stem else []
    args = launch_command_parser().parse_args(["--config_file", str(config), *flags, "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
    _, env = prepare_deepspeed_cmd_env(args)
    pipeline = tiny_config("sft_training.gradient_accumulation_steps=4", "sft_training.max_grad_norm=0.5")
    model = AutoModelForCausalLM.from_pretrained(base_model_path(pipeline))  # its sizes fill the bucket `auto`s
    trainer_args = SFTConfig(**sft_arguments(pipeline, pipeline.output_dir, plan_for(pipeline)))
    launch = {key: value for key, value in env.items() if key.startswith("ACCELERATE_")}
    with mock.patch.dict(os.environ, launch):
        plugin = DeepSpeedPlugin()
    filled = HfTrainerDeepSpeedConfig(plugin.deepspeed_config)
    filled.trainer_config_process(trainer_args)
    filled.trainer_config_finalize(trainer_args, model, 100)
    parsed = DeepSpeedConfig(filled.config)  # DeepSpeed's own parser and sanity checks (world size 1 here)
    stage = 3 if "zero3" in config.stem else 2
    assert parsed.zero_optimization_stage == stage
    assert parsed.zero_config.offload_param is None or parsed.zero_config.offload_param.device == "none"
    assert parsed.zero_config.gather_16bit_weights_on_model_save is (stage == 3)
    assert parsed.train_micro_batch_size_per_gpu == pipeline.sft_training.per_device_train_batch_size
    assert parsed.gradient_accumulation_steps == 4 and parsed.gradient_clipping == 0.5
    assert parsed.bfloat16_config.enabled is False  # fp32 on a CPU: the trainer's bf16 flag decides, not the file
