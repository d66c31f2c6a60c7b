"""Pieces of the training layer that need no model: checkpoint choice, run state, callbacks, TRL arguments."""

import json
import os
import signal
from types import SimpleNamespace

import pytest
from conftest import plan_for
from transformers import TrainerControl

from llm_finetuning.config import PipelineConfig
from llm_finetuning.model import get_backend
from llm_finetuning.reporting.run_outputs import MetricsWriter, RunState
from llm_finetuning.training.arguments import grpo_arguments, passed_on, sft_arguments
from llm_finetuning.training.callbacks import GracefulStop, MetricsLogging, PeriodicEvaluation
from llm_finetuning.training.checkpoints import MARKER, CheckpointMarker, latest_complete_checkpoint


def make_checkpoint(root, step, complete, run_id=None):
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text("{}")
    if complete:
        (folder / MARKER).write_text(json.dumps({"global_step": step, "run_id": run_id}))
    return folder


@pytest.mark.parametrize(("layout", "expected"), [
    ({}, None),
    ({2: True}, 2),
    ({2: True, 4: True}, 4),
    ({2: True, 4: False}, 2),          # a save that died mid-write is skipped
    ({2: False, 10: True, 9: True}, 10),
    ({3: False}, None),
])
def test_latest_complete_checkpoint(tmp_path, layout, expected):
    for step, complete in layout.items():
        make_checkpoint(tmp_path, step, complete)
    found = latest_complete_checkpoint(tmp_path)
    assert (found.name if found else None) == (f"checkpoint-{expected}" if expected else None)


def test_checkpoint_marker_is_written_after_save(tmp_path):
    folder = make_checkpoint(tmp_path, 5, complete=False)
    CheckpointMarker("run-a").on_save(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=5), None)
    assert json.loads((folder / MARKER).read_text()) == {"global_step": 5, "run_id": "run-a"}


def test_resume_takes_only_the_checkpoints_of_its_own_run(tmp_path):
    make_checkpoint(tmp_path, 30, complete=True, run_id="earlier")  # an earlier run's, further along
    make_checkpoint(tmp_path, 10, complete=True, run_id="this")
    make_checkpoint(tmp_path, 20, complete=True, run_id=None)  # from before runs had ids
    assert latest_complete_checkpoint(tmp_path, "this").name == "checkpoint-10"
    assert latest_complete_checkpoint(tmp_path, "other") is None
    assert latest_complete_checkpoint(tmp_path, None).name == "checkpoint-20"


def test_a_checkpoint_folder_about_to_be_rewritten_loses_its_marker_first(tmp_path):
    folder = make_checkpoint(tmp_path, 10, complete=True, run_id="this")
    control = TrainerControl(should_save=True)
    CheckpointMarker("this").on_step_end(SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=10),
                                         control)  # fmt: skip
    assert not (folder / MARKER).exists()
    assert latest_complete_checkpoint(tmp_path, "this") is None


def test_run_state_round_trip(tmp_path):
    state = RunState(tmp_path)
    assert not state.is_done("sft")
    state.mark_done("sft", steps=10)
    assert RunState(tmp_path).is_done("sft")
    state.clear(run_id="next")
    assert not state.is_done("sft")
    assert state.run_id == "next"


def test_metrics_writer_keeps_scalars_only(tmp_path):
    writer = MetricsWriter(tmp_path / "m.jsonl")
    MetricsLogging(writer, "grpo").on_log(None, SimpleNamespace(global_step=3), None,
                                          logs={"reward": 1.5, "nan": float("nan"), "list": [1]})
    (record,) = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert record["phase"] == "grpo" and record["step"] == 3 and record["reward"] == 1.5
    assert "nan" not in record and "list" not in record


def test_a_failing_evaluation_does_not_stop_training(caplog):
    def broken(model, step):
        raise RuntimeError("eval blew up")

    callback = PeriodicEvaluation(every=2, evaluate=broken)
    state = SimpleNamespace(global_step=2, max_steps=10)
    callback.on_step_end(None, state, TrainerControl(), model=None)  # must not raise
    assert "eval blew up" in caplog.text


def test_graceful_stop_requests_save_and_stop():
    stop = GracefulStop()
    stop.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        control = stop.on_step_end(None, None, TrainerControl())
    finally:
        stop.restore()
    assert stop.received == signal.SIGTERM
    assert control.should_save and control.should_training_stop
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_trl_arguments_follow_the_config_on_cpu(tmp_path):
    config = PipelineConfig.from_dict({"grpo_training": {"num_generations": 2, "loss_type": "dr_grpo",
                                                         "importance_sampling_level": "sequence",
                                                         "top_k": -1, "min_p": 0.1}})
    grpo = grpo_arguments(config, tmp_path, plan_for(config, "hf"), 64, [1.0, 2.0])
    assert grpo["loss_type"] == "dr_grpo" and grpo["importance_sampling_level"] == "sequence"
    assert grpo["top_k"] == 0 and grpo["min_p"] == 0.1 and grpo["max_completion_length"] == 64
    assert grpo["reward_weights"] == [1.0, 2.0]
    assert grpo["eval_strategy"] == "no"
    sft = sft_arguments(config, tmp_path, plan_for(config))
    assert sft["completion_only_loss"] is True and sft["max_length"] == config.model.max_seq_length


def test_cpu_runs_fp32_with_checkpointing_as_configured_and_without_vllm(tmp_path, monkeypatch):
    import torch

    from llm_finetuning.model import hardware

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU machine, also on a GPU host
    monkeypatch.setattr(hardware, "cpu_computes_bf16", lambda: False)  # without bf16 arithmetic
    config = PipelineConfig()
    args = sft_arguments(config, tmp_path, plan_for(config))
    assert args["bf16"] is False and args["fp16"] is False
    assert args["gradient_checkpointing"] is True and args["use_cpu"] is True  # the default, on a CPU too
    without = config.with_overrides(["model.gradient_checkpointing=false"])
    assert sft_arguments(without, tmp_path, plan_for(without))["gradient_checkpointing"] is False
    hf = get_backend("hf")
    assert hf.rollouts(config) == "generate"
    assert hf.rollouts(config.with_overrides(["grpo_training.use_vllm=true"])) == "trl_colocate"
    assert hf.rollouts(config.with_overrides(["grpo_training.use_vllm=true", "grpo_training.vllm_mode=server"])) == "trl_server"


def test_a_trl_field_the_pipeline_sets_from_elsewhere_is_refused_naming_where():
    from llm_finetuning.schema import ConfigError
    from llm_finetuning.training.arguments import check_trainer_settings

    config = PipelineConfig.from_dict({"grpo_training": {"report_to": ["wandb"]}})
    with pytest.raises(ConfigError, match=r"grpo_training.report_to: the pipeline sets it itself .*set report_to "
                                          r"\(top level\)"):  # fmt: skip
        check_trainer_settings(config, plan_for(config))
    allowed = PipelineConfig.from_dict({"grpo_training": {"top_entropy_quantile": 0.2, "beta": 0.04}})
    check_trainer_settings(allowed, plan_for(allowed))  # TRL's own, and one the pipeline reads: accepted


def test_every_trl_field_a_section_sets_reaches_trl_and_ours_stay_ours(tmp_path):
    config = PipelineConfig.from_dict({"grpo_training": {"epsilon_high": 0.28, "warmup_steps": 0.2,
                                                         "top_entropy_quantile": 0.2},
                                       "sft_training": {"max_grad_norm": 0.5, "lr_scheduler_type": "cosine"}})
    grpo = passed_on(config.grpo_training)
    assert grpo["warmup_steps"] == 0.2 and grpo["num_generations"] == 2 and grpo["top_entropy_quantile"] == 0.2
    assert "loss_type" not in grpo  # not set, and TRL's default is ours: TRL keeps it
    assert not {"train_validation_split", "save_path", "use_vllm", "epsilon_high", "trl"} & set(grpo)
    sft = passed_on(config.sft_training)
    assert sft["max_grad_norm"] == 0.5 and sft["lr_scheduler_type"] == "cosine"
    arguments = grpo_arguments(config, tmp_path, plan_for(config, "hf"), 64, [1.0])
    assert arguments["epsilon_high"] == 0.28 and arguments["top_entropy_quantile"] == 0.2


def test_trls_engine_on_the_hf_backend_gets_its_own_memory_share_and_the_model_length(tmp_path):
    """TRL's colocated engine holds a second copy of the weights: Unsloth's 0.7 (for an engine that shares the
    training weights) would leave no room for training, so the one share field, left null, means TRL's 0.3 there."""
    from trl import GRPOConfig

    config = PipelineConfig.from_dict({"model": {"max_seq_length": 1024}, "grpo_training": {"use_vllm": True}})
    assert config.grpo_training.vllm_gpu_memory_utilization is None  # one field, each engine's own default
    assert config.grpo_training.engine_memory_share(holds_training_weights=True) == 0.7
    grpo = grpo_arguments(config, tmp_path, plan_for(config, "hf"), 64, [1.0])
    assert grpo["vllm_gpu_memory_utilization"] == 0.3 == GRPOConfig.vllm_gpu_memory_utilization
    assert grpo["vllm_max_model_length"] == 1024
    tuned = config.with_overrides(["grpo_training.vllm_gpu_memory_utilization=0.45"])
    assert grpo_arguments(tuned, tmp_path, plan_for(tuned, "hf"), 64, [1.0])["vllm_gpu_memory_utilization"] == 0.45
    # Unsloth brings its engine with the model: TRL's engine settings are not passed at all
    assert "vllm_gpu_memory_utilization" not in grpo_arguments(config, tmp_path, plan_for(config, "unsloth"), 64, [1.0])
