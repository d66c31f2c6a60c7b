"""The KL term's reference log-probs for the completions a step trains on, not for every one it generated.

With ``beta > 0`` TRL computes the reference model's log-probs in its generation pass, over the whole generation
batch. A step that chooses what it trains on (``oversample``, ``drop_silent_groups``, ``train_per_group``) keeps a
fraction of that batch (with 16 completions a problem and 4 trained, a quarter at most), so most of that forward
pass would be thrown away: on SmolLM2 on a CPU it cost more than the loss pass itself. ``GRPOStep`` therefore
hides ``beta`` from TRL's generation pass (``skipped_in_generation``) and computes the reference log-probs here,
after the choice, for the kept rows alone: the same model (the frozen "ref" adapter TRL adds for a LoRA started
from a trained adapter, the base without the adapter for a fresh one, or the reference model of a full
fine-tune), the same inputs and the same function as TRL's pass, so the same numbers for those rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["kept_log_probs", "skipped_in_generation"]


@contextlib.contextmanager
def skipped_in_generation(trainer: Any, skip: bool) -> Iterator[None]:
    """TRL's generation pass with ``beta`` read as 0 where ``skip`` (the step computes the reference later)."""
    if not skip:
        yield
        return
    beta, trainer.beta = trainer.beta, 0.0
    try:
        yield
    finally:
        trainer.beta = beta


def kept_log_probs(trainer: Any, kept: dict[str, Any]) -> torch.Tensor:
    """The reference model's per-token log-probs of the kept rows' completions (TRL's ``ref_per_token_logps``)."""
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter

    ids = torch.cat([kept["prompt_ids"], kept["completion_ids"]], dim=1)
    mask = torch.cat([kept["prompt_mask"], kept["completion_mask"]], dim=1)
    completion_tokens = kept["completion_ids"].size(1)
    unwrapped = trainer.accelerator.unwrap_model(trainer.model)
    if trainer.ref_model is not None:  # a full fine-tune's frozen copy
        model, adapter = trainer.ref_model, contextlib.nullcontext()
    else:  # TRL's frozen "ref" adapter, or the base with the adapter off
        model = trainer.model
        adapter = use_adapter(unwrapped, adapter_name="ref" if "ref" in unwrapped.peft_config else None)
    checkpointing = disable_gradient_checkpointing(trainer.model, trainer.args.gradient_checkpointing_kwargs)
    with torch.no_grad(), checkpointing, adapter:
        return trainer._get_per_token_logps_and_entropies(
            model, ids, mask, completion_tokens, batch_size=trainer.args.per_device_train_batch_size
        )[0]
