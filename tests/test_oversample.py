"""grpo_training.oversample: the groups a step trains on, chosen among more than it generated, on literal batches;
end to end in tests/test_grpo_mechanisms.py (the difficulty band's run)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from llm_finetuning.schema import ConfigError
from llm_finetuning.training.oversample import chosen_groups, extra_indices, groups_without_silent, kept_rows

IDENTITY = SimpleNamespace(gather=lambda tensor: tensor.reshape(-1))  # one process: gather returns its own


def test_groups_with_signal_are_trained_first_in_the_order_drawn():
    # four groups of two: silent, teaching, silent, teaching
    advantages = torch.tensor([0.0, 0.0, 0.7, -0.7, 1e-8, -1e-8, 0.0, 2.0])
    assert chosen_groups(advantages, group=2, wanted=2) == [1, 3]
    assert chosen_groups(advantages, group=2, wanted=1) == [1]
    assert chosen_groups(advantages, group=2, wanted=3) == [0, 1, 3]  # filled with the first silent one
    assert chosen_groups(torch.zeros(8), group=4, wanted=1) == [0]  # nothing teaches: the sampler's own first


def test_without_silent_groups_each_process_trains_as_many_as_the_one_with_the_most_that_teach():
    assert groups_without_silent([3], wanted=4) == 3  # one process: the groups that teach, not filled up to four
    assert groups_without_silent([0], wanted=4) == 1  # none teaches: one group, so the process takes part
    assert groups_without_silent([2, 0, 1], wanted=4) == 2  # equal batches on every process
    assert groups_without_silent([6, 5], wanted=4) == 4  # never more than the step trains


def test_dropping_silent_groups_needs_groups_that_split_into_trls_slices(tiny_config):
    config = tiny_config("grpo_training.drop_silent_groups=true", "grpo_training.num_generations=4",
                         "grpo_training.per_device_train_batch_size=4", "grpo_training.gradient_accumulation_steps=2")
    assert config.grpo_training.drop_silent_groups
    with pytest.raises(ConfigError, match="per group \\(4\\) must be a multiple of it"):
        tiny_config("grpo_training.drop_silent_groups=true", "grpo_training.num_generations=4",
                    "grpo_training.per_device_train_batch_size=4", "grpo_training.steps_per_generation=8")


def test_extra_prompts_are_seeded_by_step_and_process_and_repeat_on_resume():
    first = extra_indices(100, seed=1, step=3, process=0, processes=2, count=4)
    assert first == extra_indices(100, seed=1, step=3, process=0, processes=2, count=4)  # a resumed run: the same
    other_process = extra_indices(100, seed=1, step=3, process=1, processes=2, count=4)
    next_step = extra_indices(100, seed=1, step=4, process=0, processes=2, count=4)
    assert len(set(first + other_process + next_step)) == 12  # consecutive slices of one permutation
    assert all(0 <= index < 100 for index in first)
    wrapped = extra_indices(3, seed=1, step=0, process=0, processes=1, count=5)  # more than there are: around again
    assert sorted(wrapped[:3]) == [0, 1, 2] and wrapped[3:] == wrapped[:2]


def test_kept_rows_cut_every_per_row_field_and_count_the_loss_tokens_again():
    output = {
        "prompt_ids": torch.arange(8).view(4, 2),
        "completion_mask": torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]]),
        "advantages": torch.tensor([0.0, 0.0, 1.0, -1.0]),
        "importance_sampling_ratio": torch.ones(4, 3),
        "num_items_in_batch": torch.tensor(9),
        "num_images": None,
    }
    kept = kept_rows(output, [2, 3], IDENTITY)
    assert kept["prompt_ids"].tolist() == [[4, 5], [6, 7]] and kept["advantages"].tolist() == [1.0, -1.0]
    assert kept["importance_sampling_ratio"].shape == (2, 3) and kept["num_images"] is None
    assert kept["num_items_in_batch"].item() == 6  # the dapo normaliser: the kept completions' tokens


def test_oversample_needs_whole_groups_in_each_process(tiny_config, monkeypatch):
    with pytest.raises(ConfigError, match="oversample"):
        tiny_config("grpo_training.oversample=0")
    monkeypatch.setenv("WORLD_SIZE", "2")  # two processes of 2 prompts x 2 completions: TRL's rule holds, groups split
    split = ("grpo_training.per_device_train_batch_size=2", "grpo_training.gradient_accumulation_steps=1",
             "grpo_training.num_generations=4")
    assert tiny_config(*split).grpo_training.oversample == 1
    with pytest.raises(ConfigError, match="multiple of num_generations"):
        tiny_config("grpo_training.oversample=2", *split)
    monkeypatch.delenv("WORLD_SIZE")
    config = tiny_config("grpo_training.oversample=2", "grpo_training.per_device_train_batch_size=8",
                         "grpo_training.num_generations=4")  # fmt: skip
    assert config.grpo_training.oversample == 2
