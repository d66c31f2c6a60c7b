"""Reward functions for GRPO, looked up by name.

>>> from llm_finetuning.rewards import get_reward
>>> get_reward("match_format_exactly")(completions=["ok<end_working_out><SOLUTION>4</SOLUTION>"])
[3.0]

Every reward follows TRL's calling convention, returns one float (or ``None``) per completion, never
raises, and is picklable; see ``base.py`` for the contract, ``text.py`` for the completion helpers
and ``registry.py`` for the names. The answer rewards grade with ``llm_finetuning.grading``, whose
sympy worker starts when ``build_rewards`` builds a reward that needs it.
"""

from .base import Reward, RewardParamError
from .registry import (
    REWARDS,
    UnknownRewardError,
    available_rewards,
    build_rewards,
    get_reward,
    validate_reward_specs,
)

__all__ = [
    "REWARDS",
    "Reward",
    "RewardParamError",
    "UnknownRewardError",
    "available_rewards",
    "build_rewards",
    "get_reward",
    "validate_reward_specs",
]
