"""How rewards become advantages (rewards/estimators.py, training/advantages.py): the correctness gate and the group
figures, on literal groups; TRL's aggregations computed as TRL does, and an estimator added in a test, through
TRL's real trainer on the tiny model."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import gated_advantages

from llm_finetuning.schema import ConfigError
from llm_finetuning.training.advantages import group_figures, negative_share, weigh_negatives

G = 4


def adv(correct, shaped, scale="group", tie_weight=0.0):
    return gated_advantages(torch.tensor(correct, dtype=torch.float), torch.tensor(shaped, dtype=torch.float), G,
                            scale, tie_weight).tolist()  # fmt: skip


def test_an_all_wrong_group_with_differing_format_rewards_gets_no_advantage():
    assert adv([0, 0, 0, 0], [3.0, 1.5, 0.0, -2.0]) == [0.0, 0.0, 0.0, 0.0]


def test_where_correctness_differs_it_alone_decides():
    advantages = adv([1, 0, 0, 1], [0.0, 9.0, 9.0, 0.0])  # the wrong answers formatted best: still pushed down
    assert advantages[0] > 0 and advantages[3] > 0 and advantages[1] < 0 and advantages[2] < 0
    assert advantages[0] == pytest.approx(-advantages[1])


def test_in_a_tied_group_the_rewards_speak_at_tie_weight():
    tied = adv([1, 1, 1, 1], [2.0, 4.0, 4.0, 2.0], tie_weight=0.5)
    plain = adv([1, 1, 1, 1], [2.0, 4.0, 4.0, 2.0], tie_weight=1.0)
    assert tied == pytest.approx([p / 2 for p in plain]) and plain[1] > 0 > plain[0]


def test_scale_none_keeps_the_centred_correctness():
    assert adv([1, 0, 0, 0], [0.0] * 4, scale="none") == pytest.approx([0.75, -0.25, -0.25, -0.25])


def test_group_figures_count_signal_ties_and_phantoms():
    correct = torch.tensor([0., 0., 0., 0., 1., 1., 1., 1., 1., 0., 0., 0.])  # all wrong, all right, mixed
    total = torch.tensor([1., 2., 1., 1., 5., 5., 5., 5., 5., 1., 1., 1.])  # the all-wrong one's rewards differ
    advantages = gated_advantages(correct, total, G, "group", 0.0)
    figures = group_figures(correct, total, advantages, G)
    assert figures == pytest.approx({"groups/signal": 1 / 3, "groups/all_right": 1 / 3, "groups/all_wrong": 1 / 3,
                                     "groups/phantom": 1 / 3, "groups/correct": 5 / 12})  # fmt: skip


@pytest.mark.slow
def test_a_gated_grpo_run_with_the_working_credit_in_ties_records_its_groups(tmp_path, tiny_config):
    """Through TRL's real trainer: the rows' worked solutions reach check_working, whose credit is the only reward
    with weight, so a group whose correctness ties teaches exactly where its workings differ."""
    from conftest import SIMPLE_SUMS

    from llm_finetuning.pipeline import RunOptions, run

    config = tiny_config(*SIMPLE_SUMS, "sft_training.max_steps=60", "grpo_training.max_steps=3",
                         "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
                         "grpo_training.max_completion_length=16", "grpo_training.advantages=gated",
                         "grpo_training.tie_weight=1.0", "grpo_training.logging_steps=1",
                         "rewards.rewards=[{name: match_format_exactly, weight: 0.0}, {name: check_working}]",
                         "evaluation.num_samples=8", "evaluation.sampled_k=1", "data.synthetic.num_eval=8")  # fmt: skip
    summary = run(config, RunOptions())
    assert summary["phases"]["grpo"]["steps"] == 3
    assert summary["phases"]["grpo"]["settings"]["multi_objective_aggregation"] == "sum_then_normalize"
    logs = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    grpo = [record for record in logs if record["phase"] == "grpo" and "groups/signal" in record]
    assert len(grpo) == 3
    assert all(0 <= record["groups/phantom"] <= record["groups/all_wrong"] <= 1 for record in grpo)
    credit = [record["rewards/check_working/mean"] for record in grpo]
    assert all(0 <= value <= 1 for value in credit)  # NaN (TRL's mean of None) if the column never reached it
    for record in grpo:  # every group where correctness differs teaches; a tied one only where its credit differs
        tied = record["groups/all_right"] + record["groups/all_wrong"]
        assert record["groups/signal"] >= 1 - tied - 1e-6
        assert record["groups/signal"] <= 1 - tied + record["groups/phantom"] + record["groups/all_right"] + 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_the_kl_reference_is_the_policy_grpo_starts_from_and_is_not_saved(lora, tmp_path, tiny_config):
    from conftest import SIMPLE_SUMS

    from llm_finetuning.pipeline import RunOptions, run

    adapter = ["model.lora={rank: 8, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj]}"] if lora else []
    config = tiny_config(*SIMPLE_SUMS, *adapter, "sft_training.max_steps=40", "grpo_training.max_steps=1",
                         "grpo_training.beta=0.1", "grpo_training.per_device_train_batch_size=8",
                         "grpo_training.num_generations=4", "grpo_training.max_completion_length=16",
                         "grpo_training.logging_steps=1", "evaluation.enabled=false")  # fmt: skip
    summary = run(config, RunOptions(preflight=True))  # the preflight's GRPO trainer comes first: TRL adds a
    assert summary["reference"]["model"] == "the policy GRPO starts from"  # "ref" adapter per trainer
    assert not (tmp_path / "grpo_saved_lora" / "ref").exists()  # the reference is not saved with the adapter
    first = next(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
                 if '"phase": "grpo"' in line and '"kl"' in line)  # fmt: skip
    assert first["kl"] < 1e-6  # the first step's policy is the reference itself; the pre-SFT model is far from it


@pytest.mark.slow
def test_trls_aggregations_are_computed_as_trl_computes_them(tmp_path, tiny_config, monkeypatch):
    """Every step of a tiny GRPO run under ``sum`` and under ``normalize_then_sum``: the registry's advantages equal
    TRL's own, number for number (the trainer's output before ours replaced them)."""
    from trl import GRPOTrainer

    from llm_finetuning.pipeline import RunOptions, run
    from llm_finetuning.rewards.estimators import ESTIMATORS

    for name in ("sum", "normalize_then_sum"):
        trl_figures, ours = [], []
        original, estimate = GRPOTrainer._generate_and_score_completions, ESTIMATORS[name]

        def trls(self, inputs, original=original, seen=trl_figures):
            out = original(self, inputs)
            seen.append(out["advantages"].clone())
            return out

        def recorded(scores, estimate=estimate, seen=ours):
            seen.append(estimate(scores))
            return seen[-1]

        monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", trls)
        monkeypatch.setitem(ESTIMATORS, name, recorded)
        config = tiny_config("grpo_training.max_steps=2", "grpo_training.per_device_train_batch_size=8",
                             "grpo_training.num_generations=4", "grpo_training.max_completion_length=12",
                             f"grpo_training.advantages={name}", "evaluation.enabled=false",
                             output_dir=tmp_path / name)  # fmt: skip
        run(config, RunOptions(skip_sft=True))
        assert len(ours) == len(trl_figures) == 2
        for mine, theirs in zip(ours, trl_figures, strict=True):
            assert torch.equal(mine.to(theirs.dtype), theirs)
        assert any(figures.abs().sum() > 0 for figures in ours)  # the rewards differed somewhere: a real check


@pytest.mark.slow
def test_an_estimator_added_in_one_function_trains_the_tiny_model_by_its_name(tmp_path):
    from conftest import TEST_SCHEDULE, demo_config

    from llm_finetuning.pipeline import RunOptions, run
    from llm_finetuning.rewards.estimators import ESTIMATORS, Scores, estimator
    from llm_finetuning.schema import ConfigError
    from llm_finetuning.session.checks import check_config

    returned = []

    @estimator("centred_unscaled")
    def centred_unscaled(scores: Scores) -> torch.Tensor:
        """The rewards' weighted sum minus its group's mean, not divided by the group's spread."""
        total = torch.nan_to_num(scores.rewards * scores.weights).sum(dim=1).view(-1, scores.group)
        returned.append((total - total.mean(dim=1, keepdim=True)).reshape(-1))
        return returned[-1]

    try:
        config = demo_config(tmp_path, *TEST_SCHEDULE, "grpo_training.max_steps=2", "grpo_training.logging_steps=1",
                             "grpo_training.advantages=centred_unscaled", "evaluation.enabled=false")  # fmt: skip
        summary = run(config, RunOptions())
    finally:
        del ESTIMATORS["centred_unscaled"]
    assert summary["phases"]["grpo"]["steps"] == 2 and len(returned) == 2
    logs = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in logs if record["phase"] == "grpo" and "groups/signal" in record]
    for record, advantages in zip(steps, returned, strict=True):  # the groups that taught are those it gave advantages
        teaching = (advantages.view(-1, 4).abs().amax(dim=1) > 1e-6).float().mean().item()
        assert record["groups/signal"] == pytest.approx(teaching)
    assert any(record["groups/signal"] > 0 for record in steps)  # rewards differed within some group: a real check
    with pytest.raises(ConfigError, match="unknown advantage estimator 'gatd'; did you mean gated"):
        check_config(demo_config(tmp_path, "grpo_training.advantages=gatd"))


def test_negative_weight_scales_only_the_advantages_below_zero():
    advantages = torch.tensor(adv([1, 0, 0, 0], [0.0] * 4))  # one right of four: +1.5, three at -0.5
    weighted = weigh_negatives(advantages, 0.25)
    assert weighted.tolist() == pytest.approx([1.5, -0.125, -0.125, -0.125], abs=1e-3)
    assert weigh_negatives(advantages, 1.0) is advantages  # GRPO's: untouched
    assert negative_share(advantages) == pytest.approx(0.5)  # under the gate, a group's pushes are equal in sum
    assert negative_share(weighted) == pytest.approx(0.375 / 1.875)
    assert negative_share(torch.zeros(4)) == 0.0


def test_negative_weight_is_checked_when_the_config_is_built(tiny_config):
    with pytest.raises(ConfigError, match="negative_weight"):
        tiny_config("grpo_training.negative_weight=-0.5")

