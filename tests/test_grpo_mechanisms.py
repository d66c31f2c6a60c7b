"""The mechanisms around GRPO's steps: problems kept by pass rate, the best weights kept, evaluation's own sampling,
and the warnings and hints that say when GRPO is about to make the model worse.

Units on literal figures; end to end on the tiny model through TRL's real trainer (marked slow).
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from conftest import SIMPLE_SUMS

from llm_finetuning.config import PipelineConfig
from llm_finetuning.rollout import SamplingSettings
from llm_finetuning.schema import ConfigError
from llm_finetuning.tools.debug_grpo import HintContext, hints, sampling_filters
from llm_finetuning.training.health import GRPOHealth
from llm_finetuning.training.selection import BestWeights, held_out_warning

SHORT_GRPO = [*SIMPLE_SUMS, "sft_training.max_steps=60", "grpo_training.max_steps=4",
              "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
              "grpo_training.max_completion_length=16", "grpo_training.logging_steps=1",
              "evaluation.num_samples=8", "evaluation.sampled_k=1", "data.synthetic.num_eval=16"]  # fmt: skip


def test_the_difficulty_band_is_checked_when_the_config_is_built(tiny_config):
    for band in ("[0.9, 0.1]", "[0.1]", "[-0.1, 0.5]"):
        with pytest.raises(ConfigError, match="difficulty_band"):
            tiny_config(f"grpo_training.difficulty_band={band}")
    assert tiny_config("grpo_training.difficulty_band=[0.1, 0.9]").grpo_training.difficulty_band == [0.1, 0.9]


def test_evaluation_samples_as_its_own_settings_say_and_rollouts_as_grpo_does(tiny_config):
    config = tiny_config("grpo_training.min_p=0", "evaluation.sampling={temperature: 0.7, min_p: 0.1}")
    evaluation = SamplingSettings.from_config(config, num_samples=2, max_new_tokens=8, evaluation=True)
    rollouts = SamplingSettings.from_config(config, num_samples=2, max_new_tokens=8)
    assert (evaluation.temperature, evaluation.min_p) == (0.7, 0.1)
    assert (rollouts.temperature, rollouts.min_p) == (1.0, 0.0)
    plain = tiny_config()
    assert SamplingSettings.from_config(plain, num_samples=2, max_new_tokens=8, evaluation=True).min_p == \
        plain.rollout_sampling.min_p  # null: as the rollouts


def test_keep_best_keeps_the_first_best_and_falls_back_to_the_start(tmp_path):
    saved = []
    best = BestWeights(tmp_path / "grpo" / "best", tmp_path / "sft" / "final", run_id="r")
    for step, accuracy in ((0, 0.30), (10, 0.25), (20, 0.35), (30, 0.35), (40, 0.20)):
        best.consider(step, accuracy, save=saved.append)
    assert (best.step, best.accuracy, saved) == (20, 0.35, [tmp_path / "grpo" / "best"])
    assert best.weights() == tmp_path / "grpo" / "best"
    again = BestWeights.load(tmp_path / "grpo" / "best", tmp_path / "sft" / "final", run_id="r")
    assert (again.step, again.accuracy) == (20, 0.35)  # a resumed run keeps the choice
    assert BestWeights.load(tmp_path / "grpo" / "best", tmp_path / "sft" / "final", run_id="other").step == -1
    nothing_better = BestWeights(tmp_path / "b", tmp_path / "sft" / "final", run_id="r")
    nothing_better.consider(0, 0.5, save=saved.append)
    nothing_better.consider(10, 0.4, save=saved.append)
    assert nothing_better.weights() == tmp_path / "sft" / "final"


@pytest.mark.parametrize(("start", "now", "warned"), [(0.30, 0.29, False), (0.30, 0.20, True), (0.2, 0.3, False)])
def test_a_held_out_fall_of_two_standard_errors_is_warned(start, now, warned):
    assert (held_out_warning(start, now, n=400, step=30) is not None) == warned


def test_training_warnings_name_phantom_advantages_and_shrinking_completions(caplog):
    health = GRPOHealth("sum")
    with caplog.at_level(logging.WARNING, logger="llm_finetuning.training.health"):
        for step in range(1, 13):
            length = 30.0 if step <= 5 else 14.0
            health.on_log(None, SimpleNamespace(global_step=step), None,
                          logs={"groups/phantom": 0.4, "completions/mean_length": length})  # fmt: skip
    messages = [r.getMessage() for r in caplog.records]
    assert sum("phantom advantages" in m and "advantages: gated" in m for m in messages) == 1  # said once
    assert sum("shrank from 30.0 to 14.0 tokens" in m for m in messages) == 1
    gated = GRPOHealth("gated")
    for step in range(1, 6):
        gated.on_log(None, SimpleNamespace(global_step=step), None, logs={"groups/phantom": 0.9})
    assert gated.warned == set()  # the gate gives all-wrong groups no advantage: nothing to warn of


@pytest.mark.parametrize(("last", "warned"), [(0.034, False), (0.010, True)])
def test_collapsing_entropy_is_warned_once_a_halving_is_not(caplog, last, warned):
    health = GRPOHealth("gated")
    with caplog.at_level(logging.WARNING, logger="llm_finetuning.training.health"):
        for step in range(1, 13):
            health.on_log(None, SimpleNamespace(global_step=step), None,
                          logs={"entropy": 0.063 if step <= 5 else last})  # fmt: skip
    messages = [r.getMessage() for r in caplog.records if "entropy fell" in r.getMessage()]
    assert len(messages) == (1 if warned else 0)
    assert not warned or "fell from 0.063 to 0.010" in messages[0] and "grpo_training.temperature" in messages[0]


def test_debug_hints_name_phantom_advantages_all_wrong_groups_and_truncated_sampling():
    overall = {"distinct": 0.9, "tags": {}, "zero_std_groups": 0.1, "truncation_rate": 0.0, "correct": 0.1,
               "all_wrong_groups": 0.6, "phantom_groups": 0.5}  # fmt: skip
    sampling = PipelineConfig().rollout_sampling  # the defaults: min_p 0.1
    context = HintContext(1.0, 8, 64, True, "sum", sampling_filters(sampling))
    found = {hint["id"] for hint in hints(overall, context)}
    assert {"phantom_advantages", "all_wrong_groups", "truncated_sampling"} <= found
    quiet = HintContext(1.0, 8, 64, True, "gated", "")
    assert {hint["id"] for hint in hints(overall, quiet)} == {"all_wrong_groups"}


@pytest.mark.slow
def test_grpo_trains_on_the_problems_within_the_band_oversampled_and_a_resume_reuses_them(tmp_path, tiny_config):
    from llm_finetuning.pipeline import RunOptions, run

    config = tiny_config(*SHORT_GRPO, "grpo_training.difficulty_band=[0.0, 0.75]", "grpo_training.difficulty_pool=24",
                         "grpo_training.difficulty_samples=4", "grpo_training.oversample=3")  # fmt: skip
    summary = run(config, RunOptions())
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in steps if record["phase"] == "grpo" and "groups/trained_signal" in record]
    assert len(steps) == 4  # every step chose among three times its groups, the teaching ones first
    for record in steps:
        generated = record["groups/signal"]  # of 6 groups; the step trains on 2
        assert record["groups/trained_signal"] == pytest.approx(min(1.0, round(generated * 6) / 2))
    record = summary["grpo_problems"]
    assert record["scored"] == 24 and 0 < record["kept"] <= 24 and sum(record["pass_rates"].values()) == 24
    assert record["pass_rates"]["1"] == 24 - record["kept"]  # [0, 0.75] drops exactly the always-solved ones
    saved = json.loads((tmp_path / "grpo" / "difficulty.json").read_text())
    assert len(saved["kept"]) == record["kept"] and saved["run_id"] == summary["run_id"]


@pytest.mark.slow
def test_dropping_silent_groups_trains_each_step_on_the_groups_that_teach_alone(tmp_path, tiny_config):
    from llm_finetuning.pipeline import RunOptions, run

    run(tiny_config(*SHORT_GRPO, "grpo_training.oversample=3", "grpo_training.drop_silent_groups=true"), RunOptions())
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in steps if record["phase"] == "grpo" and "groups/trained" in record]
    assert len(steps) == 4
    for record in steps:  # of 6 groups generated, at most 2 trained: those with signal, one silent where none
        teaching = round(record["groups/signal"] * 6)
        assert record["groups/trained"] == max(1, min(2, teaching))
        assert record["groups/trained_signal"] == (1.0 if teaching else 0.0)


@pytest.mark.slow
def test_keep_best_chooses_on_problems_of_its_own_and_guidance_fills_all_wrong_groups(tmp_path, tiny_config):
    from llm_finetuning.pipeline import RunOptions, run

    config = tiny_config(*SHORT_GRPO, "grpo_training.keep_best=true", "evaluation.grpo_every_steps=2",
                         "evaluation.selection_samples=8", "grpo_training.learning_rate=0.05",
                         "grpo_training.guidance=true")  # fmt: skip
    summary = run(config, RunOptions())
    kept = summary["phases"]["grpo"]["settings"]["kept_step"]
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["phase"] == "grpo" and "groups/guided" in r]
    assert len(steps) == 4 and any(r["groups/guided"] > 0 for r in steps)  # lr 0.05 breaks the policy: all wrong
    for record in steps:  # every all-wrong group got its worked solution, which the gate scores right
        assert record["groups/all_wrong"] == 0
        assert record["groups/signal"] >= record["groups/guided"]
        assert record["groups/correct"] >= record["groups/guided"] / 4  # one of each such group's four
    scored = {r["step"]: r["answer_accuracy"] for r in records
              if r["phase"] == "eval" and r["stage"].startswith("grpo_step_")}
    assert sorted(scored) == [0, 2, 4]  # the start, every eval_steps, the last step: on the selection problems
    assert kept == max(scored, key=lambda step: (scored[step], -step))  # the first of the best
    assert json.loads((tmp_path / "grpo" / "best.json").read_text())["step"] == kept


@pytest.mark.slow
def test_a_grpo_step_of_the_tiny_model_pushes_wrong_answers_down_at_the_negative_weight(tmp_path, tiny_config):
    """Through the real trainer: the gate's groups push up and down equally, so with the wrong answers' advantages
    at a quarter every step that trains on a group with signal gives them 0.25 / 1.25 of the advantages."""
    from llm_finetuning.pipeline import RunOptions, run

    run(tiny_config(*SHORT_GRPO, "sft_training.learning_rate=3e-3", "grpo_training.max_completion_length=20",
                    "grpo_training.advantages=gated", "grpo_training.negative_weight=0.25",
                    "grpo_training.oversample=3", "grpo_training.drop_silent_groups=true"), RunOptions())  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["phase"] == "grpo" and "groups/trained_signal" in record]
    assert len(steps) == 4
    taught = [record for record in steps if record["groups/trained_signal"] > 0]
    assert taught, "no step of the run had a group with both right and wrong answers"
    for record in taught:
        assert record["advantages/negative_share"] == pytest.approx(0.2, abs=1e-4)
