"""grpo_training.train_per_group: the completions of a group a step trains on (the widest spread of advantages) and
their advantages over the kept ones, on literal groups; end to end on the tiny model (marked slow)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from llm_finetuning.rewards.estimators import Scores
from llm_finetuning.schema import ConfigError
from llm_finetuning.training.downsample import widest_rows
from llm_finetuning.training.grpo_trainer import GRPOStep, StepRecipe


def test_under_the_gate_as_many_right_as_wrong_are_kept_where_the_group_has_them():
    right_then_wrong = [0.5] * 8 + [-0.5] * 8  # 8 right, 8 wrong of 16
    assert widest_rows(right_then_wrong, keep=4) == [0, 1, 8, 9]  # two of each, the first sampled
    one_right = [-0.25] * 5 + [3.75] + [-0.25] * 10  # 1 right of 16: it and the first three wrong
    assert widest_rows(one_right, keep=4) == [0, 1, 2, 5]
    one_wrong = [0.25] * 15 + [-3.75]
    assert widest_rows(one_wrong, keep=4) == [0, 1, 2, 15]
    assert widest_rows([0.0] * 6, keep=2) == [0, 1]  # a silent group: its first ones
    assert widest_rows([1.0, -1.0], keep=4) == [0, 1]  # never more than the group


def test_graded_advantages_keep_the_extremes_whose_variance_is_largest():
    # 2 kept of 5: the highest and the lowest
    assert widest_rows([0.1, 2.0, -0.3, 0.0, -1.5], keep=2) == [1, 4]
    # 3 of 5: one high value far out, two at the bottom beat two at the top
    assert widest_rows([3.0, 0.2, 0.1, -0.9, -1.0], keep=3) == [0, 3, 4]


def test_kept_completions_get_the_estimators_advantages_over_the_kept_ones():
    # one process, two groups of 4 (4 rows each); group 0: 1 right of 4, group 1: 3 right of 4
    correct = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    rewards = correct.unsqueeze(1)
    trainer = SimpleNamespace(
        _batch_scores=Scores(rewards, torch.tensor([1.0]), correct, group=4, scale="group", tie_weight=0.0),
        accelerator=SimpleNamespace(process_index=0, gather=lambda tensor: tensor),
        recipe=StepRecipe(is_correct=lambda text, row: True, estimator="gated", train_per_group=2),
    )
    kept = GRPOStep.kept_advantages(trainer, rows=[0, 1, 4, 6], size=8, per_group=2)
    # each kept pair is one right and one wrong: a group of two, centred and scaled in itself
    assert [round(value, 3) for value in kept.tolist()] == [-0.707, 0.707, 0.707, -0.707]


def test_train_per_group_is_between_two_and_the_group(tiny_config):
    assert tiny_config("grpo_training.train_per_group=2").grpo_training.trained_per_group == 2
    assert tiny_config().grpo_training.trained_per_group == tiny_config().grpo_training.num_generations
    for value in (1, 99):
        with pytest.raises(ConfigError, match="train_per_group: must be 2 to num_generations"):
            tiny_config(f"grpo_training.train_per_group={value}")


@pytest.mark.slow
def test_each_step_trains_on_the_widest_completions_of_its_groups(tmp_path, tiny_config):
    from test_grpo_mechanisms import SHORT_GRPO

    from llm_finetuning.pipeline import RunOptions, run

    run(tiny_config(*SHORT_GRPO, "grpo_training.num_generations=8", "grpo_training.per_device_train_batch_size=16",
                    "grpo_training.train_per_group=2"), RunOptions())  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["phase"] == "grpo" and "groups/trained" in record]
    assert len(steps) == 4
    for record in steps:  # 2 groups of 8 generated and scored; 2 of each trained
        assert record["groups/trained"] == 2 and record["groups/trained_completions"] == 4
        # a pair kept from a mixed group is mixed: the trained groups carry the signal the generated ones did
        assert record["groups/trained_signal"] == pytest.approx(record["groups/signal"])


@pytest.mark.slow
def test_the_kl_terms_reference_is_computed_for_the_kept_completions_alone(tmp_path, tiny_config):
    from test_grpo_mechanisms import SHORT_GRPO

    from llm_finetuning.pipeline import RunOptions, run

    run(tiny_config(*SHORT_GRPO, "grpo_training.num_generations=8", "grpo_training.per_device_train_batch_size=16",
                    "grpo_training.train_per_group=2", "grpo_training.beta=0.5"), RunOptions())  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["phase"] == "grpo" and "kl" in record]
    assert len(steps) == 4
    # the first step's policy is its reference: the kept rows' reference log-probs are theirs, so the KL is 0
    assert steps[0]["kl"] == pytest.approx(0.0, abs=1e-6)
    assert all(record["kl"] > 1e-6 for record in steps[1:])  # then the policy moves away from it
