"""Sampling under ``min_p`` on vLLM's CPU build: one draw among the tokens min_p keeps, not over the vocabulary.

vLLM's CPU sampler handles a batch of ``min_p`` requests in three passes over every row's whole vocabulary: a
softmax for min_p's mask, then a second softmax and exponential noise for the draw (49,152 values a row for
SmolLM2), and, under the processed log-prob mode TRL asks for, a log-softmax that nothing reads unless a request
wants log-probs. With ``min_p`` 0.1 a row keeps a handful of tokens (those at least a tenth as likely as the
likeliest), so ``draw_within_min_p`` finds them in logit space (``logit >= max + log(min_p)``, the same test as
``p >= min_p * p_max``) and draws among them with the Gumbel-max rule (argmax of logit minus the log of
exponential noise: the same distribution as vLLM's ``argmax(p / noise)``). The tokens come from the same
distribution; the draws differ from vLLM's, since noise is drawn for the kept tokens only.

``use_min_p_draws(llm)`` puts it into that engine's sampler (a subclass of vLLM's ``Sampler`` for the one sampler
object; vLLM's class is left alone), for the batches it fits exactly:
every request sampled with ``min_p`` and nothing else that filters (no top-k/top-p, no other
argmax-invariant processor, no per-request seed), and none asking for log-probs. Every other batch (GRPO's
rollouts, which ask for log-probs and sample without ``min_p``; greedy decoding) goes through vLLM's own code.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

__all__ = ["draw_within_min_p", "use_min_p_draws"]

SPARSE_SHARE = 1 / 16  # kept tokens above this share of the batch's values: one dense draw is cheaper


def draw_within_min_p(logits: torch.Tensor, min_p: torch.Tensor) -> torch.Tensor:
    """One token per row of ``logits`` (temperature applied), drawn from its softmax restricted to the tokens
    whose probability is at least ``min_p`` (a ``(rows, 1)`` tensor) times the row's largest; torch's default
    generator gives the noise."""
    floor = logits.amax(dim=-1, keepdim=True) + torch.log(min_p.to(logits.dtype))
    kept = logits >= floor
    rows, columns = torch.nonzero(kept, as_tuple=True)
    if rows.numel() > SPARSE_SHARE * logits.numel():
        keys = logits.masked_fill(~kept, -math.inf) - torch.empty_like(logits).exponential_().log_()
        return keys.argmax(dim=-1)
    values = logits[rows, columns]
    keys = values - torch.empty_like(values).exponential_().log_()
    best = torch.full((logits.shape[0],), -math.inf, dtype=keys.dtype, device=logits.device)
    best.scatter_reduce_(0, rows, keys, "amax")  # each row's largest key
    winners = keys == best[rows]
    tokens = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    tokens[rows[winners]] = columns[winners]
    return tokens


def use_min_p_draws(llm: Any) -> None:
    """Route the sampler of ``llm`` (a ``vllm.LLM`` of the CPU build, its engine in this process) through
    ``draw_within_min_p`` where a batch fits it: the one sampler object becomes a ``MinPDrawingSampler``, vLLM's
    class untouched (another engine keeps vLLM's own)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:  # no vLLM in this environment (a stand-in engine): no sampler of its to route
        return
    if current_platform.is_cpu():
        llm.collective_rpc(_draw_within_min_p_on)


def _draw_within_min_p_on(worker: Any) -> None:
    """On the engine's worker (called by ``collective_rpc``): its model runner's sampler draws under min_p here."""
    sampler = worker.model_runner.sampler
    sampler.__class__ = _min_p_drawing(type(sampler))  # same object and state, one more method: ``sample``


@functools.cache
def _min_p_drawing(sampler_class: type) -> type:
    """vLLM's ``Sampler`` class with ``sample`` drawing among min_p's tokens where ``_min_p_alone`` allows."""
    from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor

    def sample(self: Any, logits: torch.Tensor, metadata: Any, logprobs_mode_override: Any = None) -> Any:
        min_p = _min_p_alone(self, logits, metadata, MinPLogitsProcessor)
        if min_p is None:
            return sampler_class.sample(self, logits, metadata, logprobs_mode_override)
        logits = self.apply_temperature(logits, metadata.temperature, True)
        return draw_within_min_p(logits, min_p), None  # no processed log-probs: no request asked for them

    return type(f"MinPDrawing{sampler_class.__name__}", (sampler_class,), {"sample": sample, "__module__": __name__})


def _min_p_alone(sampler: Any, logits: torch.Tensor, metadata: Any, min_p_class: type) -> torch.Tensor | None:
    """The batch's ``(rows, 1)`` min_p where min_p (vLLM's ``min_p_class`` processor) is the only filter on every
    row's random draw and no row wants log-probs; else None."""
    if not metadata.all_random or metadata.max_num_logprobs is not None or metadata.logprob_token_ids:
        return None
    if metadata.top_k is not None or metadata.top_p is not None or metadata.generators:
        return None
    if getattr(sampler, "use_fp64_gumbel", False):
        return None
    processors = metadata.logitsprocs.argmax_invariant
    if len(processors) != 1 or not isinstance(processors[0], min_p_class):
        return None
    min_p_processor = processors[0]
    rows = logits.shape[0]
    if min_p_processor.min_p_count != rows or min_p_processor.min_p.shape[0] != rows:
        return None
    return min_p_processor.min_p
