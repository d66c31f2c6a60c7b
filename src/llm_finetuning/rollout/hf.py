"""The hf engine: batched ``model.generate`` on the loaded model (any backend, any device).

Prompts are conversations rendered with the tokenizer's chat template and its generation prompt (which
prefills the reasoning start tag), left-padded and generated in batches. Completions are decoded with special
tokens skipped — our tags are ordinary tokens, so they survive.

    >>> completions = generate_completions(model, tokenizer, [conversation], SamplingSettings(greedy=True))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .settings import Completion, Conversation, Progress, SamplingSettings, seeded_draws


def generate_kwargs(sampling: SamplingSettings) -> dict[str, Any]:
    """The settings as ``model.generate`` keywords (0 turns top-k off there, -1 does here)."""
    if sampling.greedy:
        return {"do_sample": False, "num_return_sequences": 1}
    kwargs: dict[str, Any] = {
        "do_sample": True,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "num_return_sequences": sampling.num_samples,
        "top_k": max(0, sampling.top_k),
    }
    if sampling.min_p > 0:
        kwargs["min_p"] = sampling.min_p
    return kwargs


def render_prompts(tokenizer: Any, prompts: Sequence[Conversation | str]) -> list[str]:
    """Conversations through the chat template with the generation prompt; plain strings pass through."""
    return [
        p if isinstance(p, str) else tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]


@torch.no_grad()
def generate_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Conversation | str],
    sampling: SamplingSettings,
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> list[list[str]]:
    """``sampling.per_prompt`` completion texts for each prompt, in prompt order."""
    detailed = generate_detailed(model, tokenizer, prompts, sampling, batch_size=batch_size,
                                 progress=progress)  # fmt: skip
    return [[completion.text for completion in group] for group in detailed]


@torch.no_grad()
def generate_detailed(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Conversation | str],
    sampling: SamplingSettings,
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> list[list[Completion]]:
    """Like ``generate_completions`` but with token counts and whether each completion finished; ``progress``
    is told the completions of each batch as it finishes."""
    texts = render_prompts(tokenizer, prompts)
    was_training = model.training
    model.eval()
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    results: list[list[Completion]] = []
    try:
        with seeded_draws(sampling):
            for start in range(0, len(texts), batch_size):
                batch = _generate_batch(model, tokenizer, texts[start : start + batch_size], sampling)
                results.extend(batch)
                if progress is not None:
                    progress(sum(len(group) for group in batch))
    finally:
        tokenizer.padding_side = padding_side
        if was_training:
            model.train()
    return results


def _generate_batch(
    model: Any, tokenizer: Any, texts: list[str], sampling: SamplingSettings
) -> list[list[Completion]]:
    encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    output = model.generate(
        **encoded,
        max_new_tokens=sampling.max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **generate_kwargs(sampling),
    )
    new_tokens = output[:, encoded["input_ids"].shape[1] :]
    decoded = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
    is_real = (new_tokens != tokenizer.pad_token_id) & (new_tokens != tokenizer.eos_token_id)
    finished = (new_tokens == tokenizer.eos_token_id).any(dim=1)
    completions = [
        Completion(text, int(length), bool(done))
        for text, length, done in zip(decoded, is_real.sum(dim=1).tolist(), finished.tolist(), strict=True)
    ]
    per_prompt = sampling.per_prompt
    return [completions[i : i + per_prompt] for i in range(0, len(completions), per_prompt)]
