"""Configs written for an earlier layout still load: each moved key goes where it lives now, and one line says
which moved, so the user can update the file.

    >>> migrated({"vllm_sampling": {"min_p": 0.0}})["grpo_training"]
    {'min_p': 0.0}
"""

from __future__ import annotations

import copy
import logging
from typing import Any

logger = logging.getLogger(__name__)

# Whole sections whose keys moved into another section under the same names.
MOVED_SECTIONS = {"vllm_sampling": "grpo_training"}  # TRL's own sampling fields of GRPOConfig
# Single keys that moved to another section under another name.
MOVED_KEYS = {
    ("grpo_training", "eval_steps"): ("evaluation", "grpo_every_steps"),  # ours, not TRL's (its eval loop)
    ("model", "gpu_memory_utilization"): ("grpo_training", "vllm_gpu_memory_utilization"),  # one memory share
}
# Keys that are gone, with what does their job now.
REMOVED_KEYS = {
    ("model", "random_state"): "the adapter is initialised from seed, the run's one seed",
    ("grpo_training", "guided_completions"): "guidance puts one worked solution in an all-wrong group (on SmolLM2, "
    "four of eight did no better than one)",
}


def migrated(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` in today's layout; logs one warning naming every key that moved."""
    if not isinstance(raw, dict):
        return raw
    raw, moves = copy.deepcopy(raw), []
    for old, new in MOVED_SECTIONS.items():
        if isinstance(raw.get(old), dict):
            for key, value in raw.pop(old).items():
                raw.setdefault(new, {})[key] = value  # the old key is what the user wrote: it wins
                moves.append(f"{old}.{key} -> {new}.{key}")
    for section in ("sft_training", "grpo_training"):  # the pass-through of the old layout: by name now
        body = raw.get(section)
        if isinstance(body, dict) and isinstance(body.get("trl"), dict):
            for key, value in body.pop("trl").items():
                body[key] = value
                moves.append(f"{section}.trl.{key} -> {section}.{key}")
    for (section, key), (new_section, new_key) in MOVED_KEYS.items():
        body = raw.get(section)
        if isinstance(body, dict) and key in body:
            raw.setdefault(new_section, {})[new_key] = body.pop(key)
            moves.append(f"{section}.{key} -> {new_section}.{new_key}")
    for (section, key), instead in REMOVED_KEYS.items():
        body = raw.get(section)
        if isinstance(body, dict) and key in body:
            del body[key]
            moves.append(f"{section}.{key} removed: {instead}")
    model = raw.get("model")
    if isinstance(model, dict) and "fast_inference" in model:  # the engine choice is use_vllm's alone now
        if model.pop("fast_inference") is False:
            raw.setdefault("grpo_training", {}).setdefault("use_vllm", False)
        moves.append("model.fast_inference -> grpo_training.use_vllm (false stays false; true is null's choice)")
    grpo = raw.get("grpo_training")
    if isinstance(grpo, dict) and "eval_strategy" in grpo:  # "no" = no evaluations during GRPO
        if grpo.pop("eval_strategy") in ("no", False):  # YAML 1.1 reads a bare no as false
            raw.setdefault("evaluation", {})["grpo_every_steps"] = None
        moves.append("grpo_training.eval_strategy -> evaluation.grpo_every_steps (null = none)")
    if moves:
        logger.warning("config: keys of an earlier layout moved or removed (%s); update the file to silence this",
                       "; ".join(moves))  # fmt: skip
    return raw
