"""Worked solutions in the groups the policy cannot solve yet: ``grpo_training.guidance`` (off-policy guidance).

A group whose completions are all wrong teaches nothing under the correctness gate, so a problem the policy never
solves stays unsolved however long GRPO runs: on SmolLM2 and chain_sum, the two-digit problems that hold most of
the held-out accuracy left to gain (docs/benchmarks.md). With guidance on, each such group's last completion is
replaced, before anything is scored, by the problem's worked solution: the completion SFT taught for that row
(the data layer's ``worked_completion`` column). The group then holds a right answer among wrong ones, and its
advantages push the worked solution up and the policy's own attempts down, as in LUFFY (arXiv 2504.14945:
off-policy guidance mixed into on-policy groups). One worked solution a group: on SmolLM2, four of eight did no
better (docs/benchmarks.md), being one problem's answer four times.

The worked solution is then a completion like the others: the rewards and the grader score it, the trainer's
no-grad pass computes its log-probs (the loss's ratio is the policy's own), and the engine, which never sampled
it, reports no log-probs for its tokens (NaN: TRL's importance-sampling correction leaves those tokens alone). A
row without a worked solution (a schema without one, a solution that reaches another answer) or one longer than
``max_completion_length`` is left as generated. Training steps only; evaluation never sees it. Every step logs
``groups/guided``, the share of the step's groups given a worked solution; the step's other group figures
(``groups/correct``, ``groups/all_wrong``) count the worked solution as one of the group's answers.

    >>> guided_slots([False, False, True, False, False, False], ["w1", "w1", "w1", "", "", ""], group=3)
    []
    >>> guided_slots([False, False, False, True, False, False], ["w1", "w1", "w1", "w2", "w2", "w2"], group=3)
    [2]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..data.processor import WORKED_COLUMN
from ..errors import PipelineError

__all__ = ["guide", "guide_batch", "guided_slots", "log_available"]

logger = logging.getLogger(__name__)


def guided_slots(correct: Sequence[bool], worked: Sequence[str], group: int) -> list[int]:
    """The completions to replace: the last of each group of ``group`` whose answers are all wrong and whose
    problem has a worked solution (``worked``, one per completion, "" for none)."""
    return [start + group - 1 for start in range(0, len(correct), group)
            if not any(correct[start : start + group]) and worked[start]]  # fmt: skip


def guide(completion_ids: list[list[int]], logprobs: list[list[float | None]] | None, slots: list[int],
          worked_ids: Callable[[int], list[int] | None]) -> int:  # fmt: skip
    """Put each slot's worked solution (``worked_ids(slot)``: its token ids ending in EOS, or None when it does
    not fit) into ``completion_ids`` in place, with unknown sampling log-probs; return how many were put."""
    put = 0
    for slot in slots:
        ids = worked_ids(slot)
        if ids is None:
            continue
        completion_ids[slot] = ids
        if logprobs is not None:
            logprobs[slot] = [None] * len(ids)  # TRL reads None as NaN: tokens vLLM never sampled go uncorrected
        put += 1
    return put


def log_available(dataset: Any) -> None:
    """Say how many training problems carry a worked solution (the others' groups are never guided)."""
    available = sum(bool(text) for text in dataset[WORKED_COLUMN])
    logger.info("GRPO guidance: %d of %d training problems have a worked solution for all-wrong groups", available,
                len(dataset))  # fmt: skip


def guide_batch(trainer: Any, completion_ids: list, logprobs: list | None, rows: list[dict],
                group: int) -> tuple[list, list | None]:  # fmt: skip
    """A training batch's completions (of ``rows``, in groups of ``group``) with a worked solution in each all-wrong
    group; logs ``groups/guided``."""
    if len(rows) != len(completion_ids):
        raise PipelineError(f"grpo_training.guidance: {len(completion_ids)} completions for {len(rows)} rows (a "
                            "trainer that generates otherwise than TRL 1.15's); set guidance: false")  # fmt: skip
    tokenizer, limit = trainer.processing_class, trainer.max_completion_length
    is_correct = trainer.recipe.is_correct
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    correct = [is_correct(text, row) for text, row in zip(texts, rows, strict=True)]
    slots = guided_slots(correct, [row.get(WORKED_COLUMN) or "" for row in rows], group)

    def worked_ids(slot: int) -> list[int] | None:
        ids = [*tokenizer(rows[slot][WORKED_COLUMN], add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
        return ids if len(ids) <= limit else None

    completion_ids, logprobs = list(completion_ids), None if logprobs is None else list(logprobs)
    put = guide(completion_ids, logprobs, slots, worked_ids)
    share = torch.tensor(put / (len(rows) // group), device=trainer.accelerator.device)
    trainer._metrics["train"]["groups/guided"].append(trainer.accelerator.gather(share).mean().item())
    return completion_ids, logprobs
