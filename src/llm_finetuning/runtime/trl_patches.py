"""Every internal of TRL the project replaces, listed in one place with the TRL version it was written against.

TRL's public arguments cannot express a few things the pipeline needs, so some of its private methods are
replaced on the trainer object (never on the class: another trainer in the process keeps TRL's), or a module
attribute is swapped around one call. Each replacement is made through this module, which refuses a name it
does not list; ``tests/test_trl_contracts.py`` reads the installed TRL and checks every listed internal still
exists with the parameters the replacements were written for, so a TRL upgrade fails there, by name, instead
of silently training differently.

| TRL internal | replaced by | so that |
| --- | --- | --- |
| ``GRPOTrainer._generate_and_score_completions`` | ``training/advantages.py``, ``training/importance.py``, ``training/oversample.py``, ``training/guidance.py`` | advantages are gated on correctness; the old log-prob pass is skipped where the ratio is 1; groups with signal are trained first; guidance sees the step's rows |
| ``GRPOTrainer._generate_single_turn`` | ``training/guidance.py`` | an all-wrong group gets its problem's worked solution |
| ``GRPOTrainer._calculate_rewards`` | ``training/advantages.py`` | each reward's column is kept for the gate |
| ``GRPOTrainer._compute_loss`` | ``training/importance.py`` | the importance-sampling ratio is applied per token |
| ``GRPOTrainer._get_per_token_logps_and_entropies``, ``GRPOTrainer.compute_loss``, ``SFTTrainer.compute_loss`` | ``training/shared_prompt.py`` | a group's prompt (SFT: a batch's common prefix) is computed once |
| ``VLLMGeneration.sync_weights`` | ``rollout/trl.py`` | weights reach an engine the run owns (and vLLM's CPU build) |
| ``trl.generation.vllm_generation.LLM`` (around the engine's start) | ``rollout/trl.py`` | the engine gets the training dtype, our log-prob mode, eager mode on a CPU and room for evaluation |
| ``trl.trainer.utils._ChunkedLogProbFunction`` | ``training/trl_compat.py`` | TRL's Triton kernel has a PyTorch fallback without a GPU |
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

__all__ = ["MODULE_ATTRIBUTES", "OBJECT_METHODS", "WRITTEN_FOR", "replace_method"]

WRITTEN_FOR = "1.15"  # the TRL minor version (uv.lock) every replacement below was written and tested against

# class (TRL's import path) -> method -> TRL's parameters (without self) that the replacement takes over
OBJECT_METHODS: dict[str, dict[str, tuple[str, ...]]] = {
    "trl.GRPOTrainer": {
        "_generate_and_score_completions": ("inputs",),
        "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),
        "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
        "_compute_loss": ("model", "inputs"),
        "compute_loss": ("model", "inputs", "return_outputs", "num_items_in_batch"),
        "_get_per_token_logps_and_entropies": (
            "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size", "compute_entropy",
            "compute_aux_loss", "pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask",
            "spatial_shapes", "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids",
        ),
    },
    "trl.SFTTrainer": {"compute_loss": ("model", "inputs", "return_outputs", "num_items_in_batch")},
    "trl.generation.vllm_generation.VLLMGeneration": {"sync_weights": ()},
}

# module -> attribute swapped (see the table above)
MODULE_ATTRIBUTES = {"trl.trainer.utils": "_ChunkedLogProbFunction", "trl.generation.vllm_generation": "LLM"}

_LISTED = {method for methods in OBJECT_METHODS.values() for method in methods}


def replace_method(owner: Any, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """Bind ``function`` to ``owner`` (a trainer, TRL's vLLM generation) as its ``name``, for this object only;
    return what it replaced. ``name`` must be one this module lists (a new replacement is listed first)."""
    if name not in _LISTED:
        raise KeyError(f"{name} is not a TRL internal runtime/trl_patches.py lists; list it (and its TRL "
                       "parameters) there first")  # fmt: skip
    replaced = getattr(owner, name)
    setattr(owner, name, types.MethodType(function, owner))
    return replaced
