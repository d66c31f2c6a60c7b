"""An SFT anchor for GRPO: SFT's own loss on SFT's own data, added to every GRPO loss pass.

GRPO on problems of another distribution (longer sums, answers only) forgets part of what SFT taught on its own:
measured from a converged SFT adapter, up to 9.5 points of SFT's problems (docs/benchmarks.md). The anchor is the
remedy InstructGPT used against the same regression (PPO-ptx, its pretraining mix): each loss pass also takes
``grpo_training.sft_anchor_rows`` rows of the SFT data, as SFT's trainer tokenises them (the completion's tokens
learned, the prompt's not), and adds ``grpo_training.sft_anchor`` times their mean token loss.

What it reads is SFT's data: worked solutions of SFT's distribution, which SFT has trained on already. It never
reads a GRPO row, so an answer-only GRPO setting stays answer-only (no worked solution of a GRPO problem reaches
the step, and no reward sees one).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["AnchorRows", "anchor_indices", "anchor_loss", "completion_tokens"]


def completion_tokens(tokenizer: Any, prompt: list[dict], completion: list[dict]) -> tuple[list[int], int]:
    """A conversational SFT row's tokens, and where its completion starts: as TRL's SFT trainer reads it (the
    chat template over prompt + completion; the completion from where it and the prompt alone diverge)."""
    prompt_ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
    ids = tokenizer.apply_chat_template(prompt + completion, tokenize=True)
    prompt_ids, ids = list(_ids(prompt_ids)), list(_ids(ids))
    start = next((i for i, (a, b) in enumerate(zip(prompt_ids, ids, strict=False)) if a != b),
                 min(len(prompt_ids), len(ids)))  # fmt: skip
    return ids, start


def _ids(tokens: Any) -> Sequence[int]:
    return tokens["input_ids"] if hasattr(tokens, "keys") else tokens  # transformers 5: a BatchEncoding


def anchor_indices(count: int, rows: int, seed: int, batch: int) -> list[int]:
    """The rows of anchor batch ``batch`` (0, 1, ...): every row of ``count`` once a pass, each pass in its own order
    seeded by ``seed`` and the pass; a function of the batch's number alone, so a resumed run goes on where it was.

    >>> sorted(anchor_indices(4, 2, 0, 0) + anchor_indices(4, 2, 0, 1))
    [0, 1, 2, 3]
    """
    orders: dict[int, list[int]] = {}  # a batch spans at most a few passes: each shuffled once, not once a row
    for pass_number in {position // count for position in range(batch * rows, (batch + 1) * rows)}:
        orders[pass_number] = list(range(count))
        random.Random(seed * 1_000_003 + pass_number).shuffle(orders[pass_number])
    return [orders[position // count][position % count] for position in range(batch * rows, (batch + 1) * rows)]


class AnchorRows:
    """SFT's rows in batches of ``rows``, in an order seeded by ``seed`` (a process's own), every row once a pass."""

    def __init__(self, dataset: Any, tokenizer: Any, rows: int, seed: int) -> None:
        if len(dataset) == 0:
            raise ValueError("grpo_training.sft_anchor: the SFT dataset is empty; set sft_anchor: 0 or give data.sft")
        self.dataset, self.tokenizer, self.rows, self.seed = dataset, tokenizer, rows, seed

    def batch(self, number: int, device: Any) -> dict[str, torch.Tensor]:
        """Batch ``number``: ``input_ids``, ``attention_mask`` and ``completion_mask`` (right-padded)."""
        indices = anchor_indices(len(self.dataset), self.rows, self.seed, number)
        tokenized = [completion_tokens(self.tokenizer, row["prompt"], row["completion"])
                     for row in (self.dataset[index] for index in indices)]  # fmt: skip
        width = max(len(ids) for ids, _ in tokenized)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(tokenized), width), pad, dtype=torch.long)
        attention = torch.zeros((len(tokenized), width), dtype=torch.long)
        completion = torch.zeros((len(tokenized), width), dtype=torch.long)
        for row, (ids, start) in enumerate(tokenized):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
            completion[row, start : len(ids)] = 1
        return {"input_ids": input_ids.to(device), "attention_mask": attention.to(device),
                "completion_mask": completion.to(device)}  # fmt: skip


def anchor_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The mean token loss of the batch's completion tokens (SFT's loss, each token predicted from the ones before)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["input_ids"][:, 1:]
    mask = batch["completion_mask"][:, 1:].to(logits.dtype)
    per_token = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
