"""Token lengths and the percentile rule for GRPO prompt and completion budgets.

The rule (Unsloth's GRPO recipe): measure every prompt as the model sees it (chat template with the
generation prompt), keep prompts at or under the ``p``-th percentile length, give prompts that length + 1
tokens and completions the rest of ``max_seq_length``. Explicit ``max_prompt_length`` /
``max_completion_length`` in the config replace the computed values. With only ``max_completion_length``
given, the prompt budget is capped at ``max_seq_length - max_completion_length`` (and prompts filtered to
fit), so prompt + completion never exceed the model's context (vLLM refuses requests that do).

Percentile, precisely: ``floor(np.percentile(lengths, p))`` with numpy's default linear interpolation.
Lengths are integers, so "at or under the percentile" and "at or under its floor" keep the same rows;
on the lengths 1..10, p = 90 gives 9.1 -> 9: nine rows (90 %) kept, max_prompt_length 10.

    >>> length_limits([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], percentile=90, max_seq_length=64)
    LengthLimits(keep_at_most=9, max_prompt_length=10, max_completion_length=54)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataError

__all__ = ["LengthLimits", "length_limits", "percentile_length", "token_lengths"]


@dataclass(frozen=True)
class LengthLimits:
    keep_at_most: int  # prompts with more tokens than this are dropped
    max_prompt_length: int  # prompt budget handed to GRPO
    max_completion_length: int  # completion budget handed to GRPO


def percentile_length(lengths: Sequence[int], percentile: float) -> int:
    """``floor(np.percentile(lengths, percentile))``: the longest length kept by the percentile rule."""
    if len(lengths) == 0:
        raise ValueError("percentile_length needs at least one length")
    return math.floor(float(np.percentile(np.asarray(lengths), percentile)))


def length_limits(
    lengths: Sequence[int],
    *,
    percentile: float,
    max_seq_length: int,
    max_prompt_length: int | None = None,
    max_completion_length: int | None = None,
) -> LengthLimits:
    """Budgets for GRPO from the prompt lengths (percentile rule) or from the explicit settings."""
    if max_prompt_length is not None:
        keep_at_most, prompt_budget = max_prompt_length, max_prompt_length
    else:
        prompt_budget = percentile_length(lengths, percentile) + 1
        if max_completion_length is not None and prompt_budget + max_completion_length > max_seq_length:
            prompt_budget = max_seq_length - max_completion_length
        keep_at_most = prompt_budget - 1
    completion_budget = (
        max_seq_length - prompt_budget if max_completion_length is None else max_completion_length
    )
    if completion_budget <= 0 or prompt_budget <= 1:
        raise DataError(
            f"no room in model.max_seq_length = {max_seq_length} for prompts of {prompt_budget} tokens and "
            f"completions of {completion_budget}; raise model.max_seq_length or set grpo_training."
            "max_prompt_length / max_completion_length"
        )
    return LengthLimits(keep_at_most, prompt_budget, completion_budget)


def token_lengths(tokenizer: Any, texts: list[str]) -> list[int]:
    """Tokens per already-rendered text (no special tokens added: the chat template wrote them)."""
    encoded = tokenizer(texts, add_special_tokens=False, return_attention_mask=False)["input_ids"]
    return [len(ids) for ids in encoded]
