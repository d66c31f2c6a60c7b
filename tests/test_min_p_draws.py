"""``draw_within_min_p``: the tokens of min_p sampling, drawn among the kept tokens only (vLLM's CPU sampler under
``rollout/min_p_draws.py``). The draws must follow the softmax restricted to min_p's tokens as vLLM computes it
(``p >= min_p * p_max``), in the sparse path and in the dense one a permissive min_p takes; the engine-side
routing is checked in the vLLM lane (tests/test_vllm_generation.py)."""

from __future__ import annotations

import math

import pytest
import torch

from llm_finetuning.rollout.min_p_draws import SPARSE_SHARE, draw_within_min_p

VOCAB, DRAWS = 512, 40_000


def _logits(seed: int) -> torch.Tensor:
    """A row shaped like a language model's: a few likely tokens, a long tail."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(VOCAB, generator=generator) * 2
    logits[:6] += torch.tensor([9.0, 8.5, 8.0, 7.0, 6.0, 5.0])
    return logits


def _vllm_distribution(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """What vLLM samples from: its min_p mask (``probs < max_prob * min_p`` dropped), then the softmax."""
    probs = torch.softmax(logits, dim=-1)
    kept = probs >= probs.max() * min_p
    return torch.where(kept, probs, 0.0) / torch.where(kept, probs, 0.0).sum()


def _frequencies(logits: torch.Tensor, min_p: float, seed: int = 0) -> torch.Tensor:
    batch = logits.expand(DRAWS, -1).contiguous()
    torch.manual_seed(seed)
    tokens = draw_within_min_p(batch, torch.full((DRAWS, 1), min_p))
    return torch.bincount(tokens, minlength=VOCAB).double() / DRAWS


def _assert_drawn_as(observed: torch.Tensor, expected: torch.Tensor) -> None:
    """No token min_p drops, and every token's frequency within four standard errors of its probability."""
    assert observed[expected == 0].sum() == 0
    bound = 4 * torch.sqrt(expected * (1 - expected) / DRAWS) + 1 / DRAWS
    assert torch.all((observed - expected).abs() <= bound), (observed - expected).abs().max()


@pytest.mark.parametrize("min_p", [0.1, 0.02, 0.5])
def test_the_draws_follow_vllms_min_p_distribution(min_p):
    logits = _logits(0)
    expected = _vllm_distribution(logits, min_p).double()
    assert (expected > 0).sum() > 1  # a real choice, not one token
    _assert_drawn_as(_frequencies(logits, min_p), expected)


def test_a_permissive_min_p_takes_the_dense_draw_with_the_same_distribution():
    logits = torch.zeros(VOCAB)
    logits[:VOCAB // 2] = 1.0  # half the vocabulary kept at min_p 0.3: over the sparse share
    assert (logits >= logits.max() + math.log(0.3)).float().mean() > SPARSE_SHARE
    expected = _vllm_distribution(logits, 0.3).double()
    _assert_drawn_as(_frequencies(logits, 0.3), expected)


def test_each_row_keeps_its_own_tokens_and_a_seed_repeats_the_draws():
    rows = torch.stack([_logits(1), -_logits(3), _logits(1)])
    min_p = torch.tensor([[0.5], [0.05], [0.1]])  # 2, 34 and 8 tokens kept
    torch.manual_seed(5)
    first = torch.stack([draw_within_min_p(rows, min_p) for _ in range(200)])
    torch.manual_seed(5)
    again = torch.stack([draw_within_min_p(rows, min_p) for _ in range(200)])
    assert torch.equal(first, again)
    for row in range(3):
        allowed = _vllm_distribution(rows[row], float(min_p[row])) > 0
        drawn = first[:, row]
        assert allowed.sum() > 1 and allowed[drawn].all()
        assert len(drawn.unique()) > 1
