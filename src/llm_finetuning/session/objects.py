"""The config with Python objects in it, for ``pipeline.run`` called from Python: in-memory datasets by name
(``data.loader.in_memory``), reward callables among the rewards (``rewards/plugin.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import PipelineConfig, RewardSpec

__all__ = ["with_objects"]


def with_objects(config: PipelineConfig, rewards: list[Any] | None, sft: Any, grpo: Any) -> PipelineConfig:
    """``config`` with the datasets standing in for its own (shaped by the same rules) and the rewards added."""
    from ..data.loader import in_memory

    data = config.data
    for key, dataset in (("sft", sft), ("grpo", grpo)):
        if dataset is not None:
            spec = getattr(data, key)
            generated = spec.format in ("synthetic", "reasoning_gym")  # the config's generator: not these rows
            named = dataclasses.replace(spec, name=in_memory(key, dataset), format="auto" if generated else spec.format)
            data = dataclasses.replace(data, **{key: named})
    reward_config = config.rewards
    if rewards:
        extra = [RewardSpec(name=reward) for reward in rewards]  # a callable name: rewards/plugin.py
        reward_config = dataclasses.replace(reward_config, rewards=[*reward_config.rewards, *extra])
    return config.replace(data=data, rewards=reward_config)
