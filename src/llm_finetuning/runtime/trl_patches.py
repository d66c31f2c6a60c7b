"""Every internal of TRL the project overrides or replaces, listed in one place with the TRL version it was written
against.

TRL's public arguments cannot express a few things the pipeline needs. Our trainers are subclasses of TRL's
(``training/grpo_trainer.py``, ``training/sft.py``) that override some of its private methods; TRL's vLLM
generation object gets one method replaced on that object (never on the class); a module attribute is swapped
around one call. ``OBJECT_METHODS`` lists every such method with the parameters TRL gives it, and
``tests/test_trl_contracts.py`` reads the installed TRL and checks each still exists with them (and that our
trainers override nothing it does not list), so a TRL upgrade fails there, by name, instead of silently training
differently. ``replace_method`` refuses a name the list lacks.

| TRL internal | overridden or replaced in | so that |
| --- | --- | --- |
| ``GRPOTrainer._generate_and_score_completions`` | ``training/grpo_trainer.py`` | the step's prompts are chosen (oversampling, curriculum), advantages come from the registered estimator, groups with signal are trained first |
| ``GRPOTrainer._generate_single_turn`` | ``training/grpo_trainer.py`` | an all-wrong group gets its problem's worked solution (guidance) |
| ``GRPOTrainer._calculate_rewards`` | ``training/grpo_trainer.py`` | the grader's verdict is kept beside the rewards; with ``line_credit``, each completion's working lines are checked (TRL's loss takes the advantages per token they give) |
| ``GRPOTrainer._compute_loss`` | ``training/grpo_trainer.py`` | the importance-sampling ratio comes from the loss pass |
| ``GRPOTrainer.compute_loss`` | ``training/grpo_trainer.py`` | with ``sft_anchor``, SFT's loss on SFT's rows is added to the loss pass |
| ``GRPOTrainer._get_per_token_logps_and_entropies`` | ``training/grpo_trainer.py`` | a group's prompt is computed once; the loss pass's log-probs give the ratio |
| ``SFTTrainer.compute_loss`` | ``training/sft.py`` | a batch's common prefix is computed once |
| ``VLLMGeneration.sync_weights`` | ``rollout/trl.py`` (on the object) | weights reach an engine the run owns (and vLLM's CPU build) |
| ``trl.generation.vllm_generation.LLM`` (around the engine's start) | ``rollout/trl.py`` | the engine gets the training dtype, our log-prob mode, eager mode on a CPU and room for evaluation |
| ``trl.trainer.utils._ChunkedLogProbFunction`` | ``training/trl_compat.py`` | TRL's Triton kernel has a PyTorch fallback without a GPU |
| ``GRPOTrainer.beta`` (read as 0 around TRL's generation pass) | ``training/reference.py`` | a step that keeps part of its batch computes the KL term's reference log-probs for the kept rows alone |
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

__all__ = ["MODULE_ATTRIBUTES", "OBJECT_METHODS", "WRITTEN_FOR", "replace_method"]

# the TRL minor versions every override and replacement below is tested against: 1.15 (uv.lock, every lane) and
# 1.16 (CI's newest-versions lane); pyproject.toml allows exactly these
WRITTEN_FOR = ("1.15", "1.16")

# class (TRL's import path) -> method -> TRL's parameters (without self) that the override or replacement takes
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
