"""Experiment trackers (reporting/trackers.py): report_to as transformers takes it, and the run's evaluations, sample answers
and before/after table in TensorBoard's event files, read back. Needs the tracking extra (skipped without it)."""

from __future__ import annotations

import pytest
from conftest import SIMPLE_SUMS

from llm_finetuning.config import PipelineConfig
from llm_finetuning.errors import PipelineError
from llm_finetuning.schema import ConfigError
from llm_finetuning.session.checks import check_config


def test_report_to_takes_one_tracker_a_list_or_none_and_names_an_unknown_one():
    tiny = "configs/tiny.yaml"
    assert PipelineConfig.from_yaml(tiny, ["report_to=none"]).report_to == []
    assert PipelineConfig.from_yaml(tiny, ["report_to=[tensorboard, mlflow]"]).report_to == ["tensorboard", "mlflow"]
    with pytest.raises(ConfigError, match="did you mean wandb"):
        check_config(PipelineConfig.from_yaml(tiny, ["report_to=wandbb"]))
    assert PipelineConfig.from_yaml(tiny, ["run_name=exp-7"]).tracker_run_name == "exp-7"
    assert PipelineConfig.from_yaml(tiny).tracker_run_name == "tiny"  # the output folder's name


def test_a_tracker_that_is_not_installed_is_refused_naming_the_package(tmp_path, tiny_config, monkeypatch):
    from llm_finetuning.reporting import trackers

    monkeypatch.setitem(trackers.TRACKERS, "mlflow", "no_such_package_for_mlflow")
    with pytest.raises(PipelineError, match="needs the no_such_package_for_mlflow package"):
        trackers.Trackers.start(tiny_config("report_to=mlflow"), tmp_path)


@pytest.mark.slow
@pytest.mark.trackers
def test_a_tensorboard_event_file_holds_every_evaluation_the_samples_and_the_table(tmp_path, tiny_config):
    pytest.importorskip("tensorboard", reason="the tracking extra: uv sync --extra tracking")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from llm_finetuning.pipeline import RunOptions, run

    config = tiny_config(*SIMPLE_SUMS, "sft_training.max_steps=20", "grpo_training.max_steps=2",
                         "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
                         "grpo_training.max_completion_length=16", "evaluation.grpo_every_steps=1",
                         "evaluation.num_samples=8", "evaluation.sampled_k=1", "data.synthetic.num_eval=8",
                         "report_to=tensorboard")  # fmt: skip
    summary = run(config, RunOptions())
    events = EventAccumulator(str(tmp_path / "runs" / "evaluations"), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    scalars = events.Tags()["scalars"]
    for stage in ("before_sft", "after_sft", "grpo_step_1", "after_grpo"):
        assert f"eval/{stage}/answer_accuracy" in scalars, (stage, scalars)
    after = events.Scalars("eval/after_grpo/answer_accuracy")[-1].value
    assert after == pytest.approx(summary["eval"]["after_grpo"]["answer_accuracy"])
    texts = events.Tags()["tensors"]  # add_text writes tensors
    assert any("samples/after_sft" in tag for tag in texts) and any("before_after" in tag for tag in texts)
