"""The preflight's mechanism on the tiny model: it picks the worst case, runs one real step of each phase on it
(GRPO completions forced to the full budget), leaves the model and the random generators exactly as they were,
and turns an out-of-memory error into one line naming what to lower."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TEST_SCHEDULE

from llm_finetuning.data import load_grpo_data, load_sft_data
from llm_finetuning.errors import PipelineError
from llm_finetuning.rewards import build_rewards
from llm_finetuning.session import Session
from llm_finetuning.training.preflight import grpo_lengths, longest_rows, run_preflight, sft_lengths


def test_the_longest_rows_come_first_and_ties_keep_their_order():
    from datasets import Dataset

    rows = Dataset.from_dict({"id": list(range(6))})
    assert longest_rows(rows, [3, 9, 1, 9, 7, 2], 3)["id"] == [1, 3, 4]


def test_lengths_are_measured_as_the_trainers_render_them(tiny_tokenizer):
    from datasets import Dataset

    prompt = [{"role": "system", "content": "S"}, {"role": "user", "content": "What is 2 + 2?"}]
    rows = Dataset.from_dict({"prompt": [prompt, prompt[:1]],
                              "completion": [[{"role": "assistant", "content": "4"}]] * 2})  # fmt: skip
    (ids,) = [tiny_tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True, return_dict=False)]
    assert grpo_lengths(rows, tiny_tokenizer)[0] == len(ids)
    assert sft_lengths(rows, tiny_tokenizer)[0] > sft_lengths(rows, tiny_tokenizer)[1]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    from conftest import SMALL_MODEL, demo_config

    config = demo_config(tmp_path_factory.mktemp("preflight"), *SMALL_MODEL, *TEST_SCHEDULE)
    manager = Session.open(config).manager
    manager.load()
    return config, manager, load_sft_data(config, manager.tokenizer), load_grpo_data(config, manager.tokenizer)


def _plan(config, manager):
    from llm_finetuning.session.plan import RunPlan

    return RunPlan.resolve(config, manager.backend).with_model(config, manager.model)


def _state():
    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state()


@pytest.mark.slow
def test_one_worst_case_step_per_phase_leaves_the_model_and_the_generators_as_they_were(loaded):
    config, manager, sft_data, grpo_data = loaded
    weights = {name: p.detach().clone() for name, p in manager.model.named_parameters()}
    torch.manual_seed(123)
    before = _state()
    funcs, reward_weights = build_rewards(config.rewards, config.prompt)
    sft, grpo = run_preflight(config, _plan(config, manager), manager, Session.open(config).engines, sft_data, grpo_data, funcs,
                              reward_weights)  # fmt: skip
    assert _state()[0] == before[0] and _state()[1] == before[1] and torch.equal(_state()[2], before[2])
    for name, p in manager.model.named_parameters():
        assert torch.equal(p, weights[name]), f"{name} moved"
    assert (sft.phase, sft.rows) == ("sft", config.sft_training.per_device_train_batch_size)
    assert sft.longest_tokens == max(sft_lengths(sft_data, manager.tokenizer))
    assert "loss" in sft.logged  # a real step ran
    grpo_config = config.grpo_training
    assert grpo.rows == grpo_config.per_device_train_batch_size // grpo_config.num_generations
    # every completion ran to the budget, as the longest ones eventually will in training
    assert grpo.logged["completions/min_length"] == grpo_data.max_completion_length
    assert grpo.longest_tokens == max(grpo_lengths(grpo_data.train, manager.tokenizer)) + grpo_data.max_completion_length
    assert not (Path(config.output_dir) / ".preflight").exists()  # the probes' scratch directory is gone


@pytest.mark.slow
def test_running_out_of_memory_in_the_preflight_is_one_line_naming_what_to_lower(loaded, monkeypatch):
    from trl import SFTTrainer

    config, manager, sft_data, _ = loaded

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(SFTTrainer, "training_step", out_of_memory)
    with pytest.raises(PipelineError) as info:
        run_preflight(config, _plan(config, manager), manager, Session.open(config).engines, sft_data, None, [], [])
    message = str(info.value)
    assert message.startswith("preflight: CUDA out of memory in one SFT step on the longest SFT examples; lower ")
    assert "sft_training.per_device_train_batch_size" in message and "--no-preflight" in message
    assert "\n" not in message
