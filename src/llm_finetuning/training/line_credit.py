"""Credit by working line: ``grpo_training.line_credit``. A wrong answer's advantage lands where its working
went wrong, not on the lines before that were right.

GRPO's advantage is one number a completion, and every token of it is pushed by it. A wrong answer to a five-term
sum is mostly right lines (three right operations, one wrong, the rest carried from it): the sequence-level push
lowers the right operations with the wrong one. Where the working's lines can be checked one at a time without a
worked solution (``grading/lines.py``: the first wrong side of the first rejected line, from the answer alone):

- in a completion whose advantage is negative, the tokens before its first wrong side (in ``4 + 3 - 2 = 6 - 2``
  the ``6 - 2``) carry no advantage (and, where no line is rejected, those up to the end of its last accepted
  line: the error is in what follows, the answer or a stop); in one whose advantage is positive, the tokens from
  that side on carry none (a right answer reached through a wrong line is not taught there). The advantages become
  per token; the loss's normaliser is unchanged, so a masked token counts as a token that taught nothing.

Token offsets come from decoding each completion token alone; a completion whose pieces do not add up to its text
(bytes of one character split over tokens) keeps its sequence-level advantage. Measured on chain_sum from a
converged SFT adapter (docs/benchmarks.md, "Credit by working line"): it did not help there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..grading.lines import CreditSpan

if TYPE_CHECKING:
    import torch

__all__ = ["figures", "in_tokens", "token_advantages", "token_ends"]


def token_ends(ids: Sequence[int], text: str, tokenizer: Any) -> list[int] | None:
    """The character offset where each of ``ids``'s tokens ends in ``text`` (their decoded text), or ``None``
    where tokens decoded alone do not add up to it."""
    pieces = tokenizer.batch_decode([[int(token)] for token in ids], skip_special_tokens=True)
    if "".join(pieces) != text:
        return None
    ends, total = [], 0
    for piece in pieces:
        total += len(piece)
        ends.append(total)
    return ends


def in_tokens(span: CreditSpan, ends: list[int] | None) -> CreditSpan:
    """``span`` in tokens: the tokens wholly before ``right_until``, the first token reaching past ``wrong_from``
    (a ``CreditSpan(0, None)``, no credit moved, where ``ends`` is ``None``)."""
    if ends is None:
        return CreditSpan(0, None)
    right = sum(1 for end in ends if end <= span.right_until)
    wrong = None if span.wrong_from is None else sum(1 for end in ends if end <= span.wrong_from)
    return CreditSpan(right, wrong)


def token_advantages(advantages: torch.Tensor, spans: Sequence[CreditSpan], length: int) -> torch.Tensor:
    """``advantages`` (one a completion) as ``(completions, length)`` advantages per token, each row's ``span``
    (in tokens) applied: a negative row's accepted tokens carry 0, a positive row's tokens from its first wrong
    side on carry 0."""
    per_token = advantages.unsqueeze(1).repeat(1, length)
    for row, (advantage, span) in enumerate(zip(advantages.tolist(), spans, strict=True)):
        if advantage < 0:
            per_token[row, : span.right_until] = 0.0
        elif advantage > 0 and span.wrong_from is not None:
            per_token[row, span.wrong_from :] = 0.0
    return per_token


def figures(advantages: torch.Tensor, spans: Sequence[CreditSpan], mask: torch.Tensor) -> dict[str, float]:
    """What the credit moved this step: the share of the negative rows' tokens left without advantage, and the
    share of negative rows with a rejected line."""
    negative = [row for row, value in enumerate(advantages.tolist()) if value < 0]
    if not negative:
        return {}
    lengths = mask.sum(dim=1).tolist()
    tokens = sum(lengths[row] for row in negative)
    freed = sum(min(spans[row].right_until, lengths[row]) for row in negative)
    located = sum(spans[row].wrong_from is not None for row in negative)
    return {"line_credit/negative_tokens_freed": freed / max(tokens, 1),
            "line_credit/negative_rows_located": located / len(negative)}  # fmt: skip
