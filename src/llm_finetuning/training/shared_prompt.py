"""Tokens several rows share, computed once: GRPO's log-probs with each group's prompt computed once instead of
once per completion, and SFT's loss with the batch's common prefix (the system prompt) once and no padding.

TRL scores a batch of ``G`` completions per prompt as ``G`` full sequences, prompt included: on the real model
86 of a sequence's 116 tokens are the prompt, identical across the group. Here the rows that share a prompt
become one packed row, the prompt followed by each completion::

    [prompt without its last token] [last prompt token, c1 ...] [last prompt token, c2 ...] ...

with a mask under which the prompt attends causally to itself and each completion to the prompt and causally to
itself, and position ids equal to the columns the tokens had in the padded batch. The last prompt token is
repeated at the head of each completion (same token, same position, same context) so that the hidden state that
predicts a completion's first token sits inside its own segment, and TRL's fused LM head scores every position
against a pre-shifted label. Every completion token then sees exactly the context it sees in the full pass, so
its log-prob (and the gradient through it, the prompt's activations included, since LoRA changes them too) is the
full pass's up to floating-point reassociation; tests/test_shared_prompt.py compares both.

When it applies (``plan.shared_tokens``, decided once per run): the hf backend (Unsloth's compiled trainer
computes its own log-probs), an attention implementation that takes an arbitrary mask (``sdpa``, ``eager``), no
sliding-window layers (one mask serves every layer), no mixture-of-experts router loss (its balance depends on
which tokens are in the batch).
A call it cannot pack exactly (images, a prompt right-padded) goes to TRL's own pass.

SFT (``PrefixShared``, the model as SFT's loss pass calls it): every row of a batch begins with the same system
prompt, so the whole batch is one group keyed on its common prefix (``common_prefix``, never past the first scored
token): the prefix once, then each row's rest; TRL's loss and metrics read the outputs in the batch's own layout.

    log_probs(trainer, plain, model, input_ids, ...)  # GRPO's log-prob passes (grpo_trainer.py calls it)
    PrefixShared(model, accelerator)                  # SFT's loss pass (sft.py's trainer uses it)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["SFT_INPUTS", "PackedGroups", "PrefixShared", "common_prefix", "log_probs", "pack_groups",
           "pack_prefix", "unpack"]

_MULTIMODAL = ("pixel_values", "image_grid_thw", "pixel_attention_mask", "spatial_shapes", "num_tiles",
               "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")  # fmt: skip


@dataclass(frozen=True)
class PackedGroups:
    """A batch's rows packed by shared prompt; ``source`` maps each completion token back to its scoring slot."""

    input_ids: torch.Tensor  # (U, L): one row per distinct prompt
    attention_mask: torch.Tensor  # (U, 1, L, L) bool, True where a query may attend a key
    position_ids: torch.Tensor  # (U, L): each token's column in the padded batch
    shift_labels: torch.Tensor  # (U, L): the token each position scores, -100 where none
    source: torch.Tensor  # (B, T - width): flat index into (U * L) scoring each column from the width on, -1: none


def pack_groups(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_length: int) -> PackedGroups:
    """Pack ``input_ids`` (B, P + C; left-padded prompts, right-padded completions) by distinct prompt; ``source``
    covers the completion columns."""
    width = input_ids.size(1) - completion_length
    scored = attention_mask.bool() & (torch.arange(input_ids.size(1), device=input_ids.device) >= width)
    labels = input_ids.masked_fill(~scored, -100)
    return _pack(input_ids, attention_mask, labels, _groups(input_ids, attention_mask, width), width)


def common_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> int:
    """How many leading columns every row shares (same tokens, attended) before any row's first scored token."""
    same = (input_ids == input_ids[:1]).all(0) & attention_mask.bool().all(0)
    width = int(same.int().cumprod(0).sum())
    scored = (labels != -100).any(0).nonzero()
    return min(width, int(scored[0])) if len(scored) else width


def pack_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor,
                width: int) -> PackedGroups:  # fmt: skip
    """Pack a batch whose rows share their first ``width`` columns (``common_prefix``) into one row: the prefix
    once, then each row's rest, without padding; ``source`` covers the columns from ``width`` on."""
    return _pack(input_ids, attention_mask, labels, [list(range(input_ids.size(0)))], width)


def _pack(input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor, groups: list[list[int]],
          width: int) -> PackedGroups:  # fmt: skip
    ids, mask, scored = input_ids.tolist(), attention_mask.tolist(), labels.tolist()
    rows = [_packed_row(ids, mask, scored, width, members) for members in groups]
    length = max(len(row.tokens) for row in rows)
    source = torch.full((input_ids.size(0), input_ids.size(1) - width), -1, dtype=torch.long)
    for index, row in enumerate(rows):
        for member, slots in row.slots.items():
            source[member] = torch.where(slots >= 0, slots + index * length, slots)
    tensors = [row.padded(length) for row in rows]
    return PackedGroups(
        input_ids=torch.stack([t[0] for t in tensors]).to(input_ids.device),
        attention_mask=torch.stack([t[1] for t in tensors]).unsqueeze(1).to(input_ids.device),
        position_ids=torch.stack([t[2] for t in tensors]).to(input_ids.device),
        shift_labels=torch.stack([t[3] for t in tensors]).to(input_ids.device),
        source=source.to(input_ids.device),
    )


@dataclass
class _Row:
    tokens: list[int]
    positions: list[int]
    labels: list[int]
    segment: list[int]  # 0: the shared prompt; i > 0: the i-th row's rest
    attends: list[bool]  # whether the position may be attended as a key
    slots: dict[int, torch.Tensor]  # batch row -> packed position scoring each column from the width on (-1: none)

    def padded(self, length: int) -> tuple[torch.Tensor, ...]:
        extra = length - len(self.tokens)
        tokens = torch.tensor(self.tokens + [0] * extra)
        positions = torch.tensor(self.positions + [0] * extra)
        labels = torch.tensor(self.labels + [-100] * extra)
        segment = torch.tensor(self.segment + [-1] * extra)
        key_ok = torch.tensor(self.attends + [False] * extra)
        order = torch.arange(length)
        causal = order.unsqueeze(1) >= order.unsqueeze(0)
        same_or_prompt = (segment.unsqueeze(0) == 0) | (segment.unsqueeze(0) == segment.unsqueeze(1))
        mask = causal & same_or_prompt & key_ok.unsqueeze(0)
        mask |= torch.eye(length, dtype=torch.bool) & (segment == -1).unsqueeze(1)  # padding queries: no NaN rows
        return tokens, mask, positions, labels


def _packed_row(ids: list[list[int]], mask: list[list[int]], labels: list[list[int]], width: int,
                members: list[int]) -> _Row:  # fmt: skip
    first = members[0]
    prompt = [column for column in range(width - 1) if mask[first][column]]
    row = _Row(tokens=[ids[first][c] for c in prompt], positions=prompt, labels=[-100] * len(prompt),
               segment=[0] * len(prompt), attends=[True] * len(prompt), slots={})  # fmt: skip
    for number, member in enumerate(members, start=1):
        rest, kept, wanted = ids[member][width:], mask[member][width:], labels[member][width:]
        scored = max((k + 1 for k, label in enumerate(wanted) if label != -100), default=0)  # to the last label
        start, span = len(row.tokens), max(scored, 1)
        # the prompt's last token, then the rest but its last scored token: position k scores column width + k
        row.tokens += [ids[member][width - 1]] + rest[: span - 1]
        row.positions += list(range(width - 1, width - 1 + span))
        row.attends += [bool(mask[member][width - 1])] + [bool(on) for on in kept[: span - 1]]
        row.segment += [number] * span
        row.labels += wanted[:scored] + [-100] * (span - scored)
        slots = torch.full((len(rest),), -1, dtype=torch.long)
        for k in range(scored):
            if wanted[k] != -100:
                slots[k] = start + k
        row.slots[member] = slots
    return row


def unpack(values: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """Per-position ``values`` (U, L) of the packed batch back to the batch's columns ``source`` covers; 0 where
    nothing was scored, as TRL's pass gives."""
    picked = values.reshape(-1)[source.clamp(min=0)]
    return torch.where(source >= 0, picked, torch.zeros_like(picked))


def _packable(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_length: int, compute_aux_loss: bool,
              extra: dict[str, Any]) -> bool:  # fmt: skip
    prompt_ends_real = bool(attention_mask[:, input_ids.size(1) - completion_length - 1].all())  # left-padded
    return prompt_ends_real and not compute_aux_loss and all(extra.get(name) is None for name in _MULTIMODAL)


def log_probs(trainer: Any, plain: Callable[..., Any], model: Any, input_ids: torch.Tensor,
              attention_mask: torch.Tensor, logits_to_keep: int, batch_size: int | None = None,
              compute_entropy: bool = False, compute_aux_loss: bool = False, **extra: Any) -> Any:  # fmt: skip
    """TRL's ``_get_per_token_logps_and_entropies`` (``plain``, its parameters) with each group's prompt computed
    once; a call it cannot pack exactly goes to ``plain``."""
    if not _packable(input_ids, attention_mask, logits_to_keep, compute_aux_loss, extra):
        return plain(model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                     **extra)  # fmt: skip
    logps, entropies = [], []
    for rows in _chunks(input_ids, attention_mask, logits_to_keep, batch_size or input_ids.size(0)):
        packed = pack_groups(input_ids[rows], attention_mask[rows], logits_to_keep)
        mask = _attention_mask(packed.attention_mask, model, trainer.accelerator)
        with trainer.accelerator.autocast():
            outputs = model(input_ids=packed.input_ids, attention_mask=mask, position_ids=packed.position_ids,
                            shift_labels=packed.shift_labels, fused_lm_head=True)  # fmt: skip
        logps.append((rows, unpack(outputs.log_probs, packed.source)))
        if compute_entropy:
            entropies.append((rows, unpack(outputs.entropy, packed.source)))
    return _in_order(logps), _in_order(entropies), None


def _groups(input_ids: torch.Tensor, attention_mask: torch.Tensor, width: int) -> list[list[int]]:
    """The batch's rows grouped by prompt (the first ``width`` columns, padding ignored), in first-seen order."""
    key = input_ids[:, :width].masked_fill(attention_mask[:, :width] == 0, -1)
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, prompt in enumerate(key.tolist()):
        groups.setdefault(tuple(prompt), []).append(row)
    return list(groups.values())


def _chunks(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_length: int,
            batch_size: int) -> list[torch.Tensor]:  # fmt: skip
    """Row indices of the batch in chunks of whole groups, each of about ``batch_size`` rows (TRL's memory bound)."""
    chunks, current = [], []
    for members in _groups(input_ids, attention_mask, input_ids.size(1) - completion_length):
        if current and len(current) + len(members) > batch_size:
            chunks.append(current)
            current = []
        current += members
    chunks.append(current)
    return [torch.tensor(rows, device=input_ids.device) for rows in chunks]


def _in_order(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor | None:
    """The chunks' values back in the batch's row order."""
    if not parts:
        return None
    rows = torch.cat([rows for rows, _ in parts])
    return torch.cat([values for _, values in parts])[torch.argsort(rows)]


def _attention_mask(allowed: torch.Tensor, model: Any, accelerator: Any) -> torch.Tensor:
    """The boolean mask as the attention implementation takes it: sdpa a boolean, eager an additive float."""
    unwrapped = accelerator.unwrap_model(model)
    if getattr(unwrapped.config.get_text_config(), "_attn_implementation", "eager") == "sdpa":
        return allowed
    dtype = next(unwrapped.parameters()).dtype
    dtype = dtype if dtype.is_floating_point else torch.float32
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


SFT_INPUTS = {"input_ids", "attention_mask", "labels", "use_cache", "fused_lm_head"}  # a batch PrefixShared packs


class PrefixShared:
    """The model as TRL's SFT loss calls it (``model(**inputs, fused_lm_head=True)``), packing the batch first."""

    def __init__(self, model: Any, accelerator: Any) -> None:
        self.model, self.accelerator = model, accelerator

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor,
                 fused_lm_head: bool = False, **rest: Any) -> Any:  # fmt: skip
        width = common_prefix(input_ids, attention_mask, labels)
        if not fused_lm_head or width < 1 or set(rest) - {"use_cache"}:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                              fused_lm_head=fused_lm_head, **rest)  # fmt: skip
        from trl.trainer.utils import FusedCausalLMOutput

        packed = pack_prefix(input_ids, attention_mask, labels, width)
        outputs = self.model(input_ids=packed.input_ids, position_ids=packed.position_ids,
                             attention_mask=_attention_mask(packed.attention_mask, self.model, self.accelerator),
                             shift_labels=packed.shift_labels, fused_lm_head=True, use_cache=False)  # fmt: skip

        def in_batch_layout(values: torch.Tensor | None) -> torch.Tensor | None:  # (B, T - 1), as TRL's pass gives
            if values is None:
                return None
            before = values.new_zeros(input_ids.size(0), width - 1)  # columns 1 .. width - 1 carry no label
            return torch.cat([before, unpack(values, packed.source)], dim=1)

        label_mask = labels[:, 1:] != -100
        log_probs = in_batch_layout(outputs.log_probs)
        return FusedCausalLMOutput(
            loss=-log_probs.sum() / label_mask.sum().clamp(min=1), log_probs=log_probs,
            entropy=in_batch_layout(outputs.entropy), log_sum_sq_probs=in_batch_layout(outputs.log_sum_sq_probs),
            mean_logits=in_batch_layout(outputs.mean_logits), is_top1=in_batch_layout(outputs.is_top1),
            label_mask=label_mask,
        )
