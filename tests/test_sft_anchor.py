"""The SFT anchor in GRPO (training/anchor.py): SFT's rows tokenised as SFT's trainer does, drawn each once a pass,
their completion tokens' loss; end to end on the tiny model."""

from __future__ import annotations

import json
import math

import pytest
import torch
from datasets import Dataset

from llm_finetuning.schema import ConfigError
from llm_finetuning.training.anchor import AnchorRows, anchor_indices, anchor_loss, completion_tokens

PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]
COMPLETION = [{"role": "assistant", "content": "2 + 3 = 5"}]


def test_a_rows_completion_starts_where_its_prompt_alone_ends(tiny_tokenizer):
    ids, start = completion_tokens(tiny_tokenizer, PROMPT, COMPLETION)
    assert ids == tiny_tokenizer.apply_chat_template(PROMPT + COMPLETION, tokenize=True)["input_ids"]
    assert ids[:start] == tiny_tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True,
                                                             tokenize=True)["input_ids"]  # fmt: skip
    learned = tiny_tokenizer.decode(ids[start:])
    assert "2 + 3 = 5" in learned and "What is" not in learned


def test_a_batchs_rows_follow_from_its_number_alone_each_once_a_pass():
    first_pass = anchor_indices(5, 2, 3, 0) + anchor_indices(5, 2, 3, 1) + anchor_indices(5, 2, 3, 2)[:1]
    assert sorted(first_pass) == [0, 1, 2, 3, 4]
    second_pass = anchor_indices(5, 2, 3, 2)[1:] + anchor_indices(5, 2, 3, 3) + anchor_indices(5, 2, 3, 4)
    assert sorted(second_pass) == [0, 1, 2, 3, 4] and second_pass != first_pass  # its own order
    assert anchor_indices(50, 10, 0, 0) != anchor_indices(50, 10, 1, 0)  # each process (seed) its own order


def test_every_row_is_drawn_once_a_pass_and_padding_is_neither_attended_nor_learned(tiny_tokenizer):
    rows = [{"prompt": [{"role": "user", "content": f"What is {n} + {n}?"}],
             "completion": [{"role": "assistant", "content": f"{n} + {n} = {2 * n}" + " so" * n}]} for n in range(3)]
    anchor = AnchorRows(Dataset.from_list(rows), tiny_tokenizer, rows=2, seed=0)
    seen = []
    for number in range(3):  # two passes over three rows
        batch = anchor.batch(number, "cpu")
        assert batch["input_ids"].shape[0] == 2
        lengths = batch["attention_mask"].sum(dim=1).tolist()
        seen += lengths
        for row, length in enumerate(lengths):
            assert batch["completion_mask"][row, length:].sum() == 0  # nothing learned after the row's end
            assert batch["completion_mask"][row, :length].sum() > 0
    expected = sorted(len(completion_tokens(tiny_tokenizer, r["prompt"], r["completion"])[0]) for r in rows)
    assert sorted(seen) == sorted(expected * 2)
    with pytest.raises(ValueError, match="the SFT dataset is empty"):
        AnchorRows(Dataset.from_list([]), tiny_tokenizer, rows=2, seed=0)


class FixedLogits(torch.nn.Module):
    """Predicts the next token with logit 10 where ``right`` is 1, token 0 elsewhere (a vocabulary of 4)."""

    def __init__(self, right: torch.Tensor) -> None:
        super().__init__()
        self.right = right

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        next_ids = torch.cat([input_ids[:, 1:], input_ids[:, :1]], dim=1)
        predicted = torch.where(self.right.bool(), next_ids, torch.zeros_like(next_ids))
        logits = torch.nn.functional.one_hot(predicted, 4).float() * 10.0
        return type("Output", (), {"logits": logits})()


def test_the_loss_is_the_mean_over_completion_tokens_only():
    input_ids = torch.tensor([[1, 2, 3, 1]])
    completion = torch.tensor([[0, 0, 1, 1]])  # tokens 2 and 3 learned: predicted from positions 1 and 2
    right_where_learned = torch.tensor([[0, 1, 1, 0]])
    batch = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "completion_mask": completion}
    confident = math.log(1 + 3 * math.exp(-10.0))  # cross-entropy of a right prediction at logit 10
    assert anchor_loss(FixedLogits(right_where_learned), batch).item() == pytest.approx(confident, abs=1e-6)
    wrong = math.log(3 + math.exp(10.0))  # the target's logit 0 against one of 10
    assert anchor_loss(FixedLogits(torch.zeros_like(input_ids)), batch).item() == pytest.approx(wrong, rel=1e-4)


def test_the_anchor_is_checked_when_the_config_is_built(tiny_config):
    with pytest.raises(ConfigError, match="sft_anchor"):
        tiny_config("grpo_training.sft_anchor=-1")
    with pytest.raises(ConfigError, match="sft_anchor_rows"):
        tiny_config("grpo_training.sft_anchor_rows=0")


def test_every_grpo_step_of_the_tiny_model_adds_sfts_loss_on_sfts_rows(tmp_path, tiny_config):
    from test_grpo_mechanisms import SHORT_GRPO

    from llm_finetuning.pipeline import RunOptions, run

    run(tiny_config(*SHORT_GRPO, "grpo_training.sft_anchor=1.0", "grpo_training.sft_anchor_rows=4"), RunOptions())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["phase"] == "grpo" and "loss" in record]
    assert len(steps) == 4
    sft_final = [record for record in records if record["phase"] == "sft" and "loss" in record][-1]["loss"]
    for record in steps:  # SFT's rows, after 60 SFT steps on them: a loss near SFT's own last one, not a fresh model's
        assert 0.0 < record["sft_anchor/loss"] < max(3 * sft_final, 0.5)
