"""The reward registry: one dict from name to reward class, and the functions that build from it.

``build_rewards(config.rewards, config.prompt)`` gives TRL its ``reward_funcs`` and ``reward_weights``
(and starts the grader's worker when a reward needs it); ``validate_reward_specs`` lets config loading
reject a bad name or parameter before any model loads.
The prompt config's tags (``reasoning_start``, ``reasoning_end``, ``solution_start``,
``solution_end``) are passed to every reward that has a parameter of that name; a reward's own
``params`` override them.

>>> sorted(available_rewards())[:3]
['accuracy', 'check_answer', 'check_numbers']
>>> get_reward("check_numbers", preset="unsloth_qwen3_notebook").bounds()
(-2.5, 3.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from .answer_rewards import Accuracy, CheckAnswer, CheckNumbers, Cosine, R1Zero
from .base import Reward, RewardParamError, did_you_mean
from .format_rewards import MatchFormatApproximately, MatchFormatExactly, ThinkAnswerFormat
from .gym_rewards import ReasoningGymScore
from .other_rewards import ReasoningSteps, RepetitionPenalty
from .plugin import PluginReward, is_plugin_name
from .working_rewards import CheckWorking
from .xml_rewards import Correctness, IntAnswer, SoftFormat, StrictFormat, XmlCount

REWARDS: dict[str, type[Reward]] = {
    cls.name: cls
    for cls in (
        # the Unsloth Qwen3 GRPO notebook's four graded rewards (the default set)
        MatchFormatExactly,
        MatchFormatApproximately,
        CheckAnswer,
        CheckNumbers,
        # the DeepSeek-R1-Zero tutorial's five
        Accuracy,
        ThinkAnswerFormat,
        ReasoningSteps,
        Cosine,
        RepetitionPenalty,
        # the GSM8K XML rewards (willccbb's GRPO gist)
        Correctness,
        IntAnswer,
        StrictFormat,
        SoftFormat,
        XmlCount,
        # Dr. GRPO's r1_zero reward
        R1Zero,
        # a reasoning-gym task's own verifier (reasoning_gym:<task> data)
        ReasoningGymScore,
        # how far the working follows the problem's worked solution (a process reward for gated ties)
        CheckWorking,
    )
}

PROMPT_TAGS = ("reasoning_start", "reasoning_end", "solution_start", "solution_end")


class UnknownRewardError(ValueError):
    """A reward name that is not in the registry."""


def available_rewards() -> list[str]:
    """Every registered reward name, sorted."""
    return sorted(REWARDS)


def reward_class(name: str) -> type[Reward]:
    """The class registered as ``name``; ``UnknownRewardError`` listing the valid names otherwise."""
    if not isinstance(name, str) or name not in REWARDS:
        raise UnknownRewardError(
            f"unknown reward {name!r}{did_you_mean(str(name), REWARDS)}; valid rewards: {', '.join(available_rewards())}"
            ", or your own as module:function or file.py:function"
        )
    return REWARDS[name]


def get_reward(name: str, **params: Any) -> Reward:
    """Build the reward ``name`` with ``params``; raise ``ValueError`` naming a bad name or parameter."""
    return reward_class(name).from_params(**params)


def build_rewards(
    reward_config: Any, prompt_config: Any = None, start_workers: bool = True
) -> tuple[list[Reward], list[float]]:
    """Build the configured rewards and their weights, with tags taken from ``prompt_config``.

    ``reward_config`` is a ``RewardConfig`` (anything with ``.rewards``) or a list of ``RewardSpec``
    or of mappings with ``name``, ``weight`` and ``params``. When a reward asks the math grader, its
    sympy worker starts now, in the background, so the first comparison that needs it finds it ready; likewise
    the sandboxed worker of a reward that runs a task's verifier.
    """
    specs = _specs(reward_config)
    _check_unique(specs)
    tags = {tag: getattr(prompt_config, tag) for tag in PROMPT_TAGS if hasattr(prompt_config, tag)}
    funcs, weights = [], []
    for name, weight, params in specs:
        if callable(name) or is_plugin_name(name):
            funcs.append(_plugin(name, params))
        else:
            cls = reward_class(name)
            from_prompt = {tag: value for tag, value in tags.items() if tag in cls.param_names()}
            funcs.append(cls.from_params(**{**from_prompt, **params}))
        weights.append(weight)
    if start_workers:
        for func in funcs:
            func.start()  # sympy or a verifier imports in the background while the model loads
    return funcs, weights


def validate_reward_specs(specs: Any) -> None:
    """Reject unknown names, duplicate names, bad weights and bad parameters (cheap: builds no model
    and starts no grader worker)."""
    build_rewards(specs, start_workers=False)


def _specs(reward_config: Any) -> list[tuple[str, float, dict[str, Any]]]:
    items = getattr(reward_config, "rewards", reward_config)
    if not isinstance(items, Iterable) or isinstance(items, (str, Mapping)):
        # ValueError, not TypeError: config loading reports every ValueError from here as a config error
        raise ValueError(f"expected a list of rewards, got {type(items).__name__}")  # noqa: TRY004
    return [_spec(item) for item in items]


def _plugin(name: Any, params: dict[str, Any]) -> PluginReward:
    """A reward of the user's (``rewards/plugin.py``); ``sandbox`` and ``timeout`` in its params are the wrapper's."""
    own = {key: params.pop(key) for key in ("sandbox", "timeout") if key in params}
    if callable(name):
        return PluginReward(getattr(name, "__qualname__", "reward"), params, function=name, **own)
    return PluginReward(name, params, **own)


def _spec(item: Any) -> tuple[Any, float, dict[str, Any]]:
    get = item.get if isinstance(item, Mapping) else lambda key, default: getattr(item, key, default)
    name, weight, params = get("name", None), get("weight", 1.0), get("params", None) or {}
    if not (callable(name) or is_plugin_name(name)):
        reward_class(name)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise RewardParamError(f"{name}: weight must be a finite number (got {weight!r})")
    if not isinstance(params, Mapping) or not all(isinstance(key, str) for key in params):
        raise RewardParamError(
            f"{name}: params must be a mapping of parameter names to values (got {params!r})"
        )
    return name, float(weight), dict(params)


def _check_unique(specs: list[tuple[Any, float, dict[str, Any]]]) -> None:
    names = [name for name, _, _ in specs if isinstance(name, str)]
    for name in names:
        if names.count(name) > 1:
            raise RewardParamError(
                f"reward '{name}' is listed {names.count(name)} times; TRL logs rewards by name, so list it once"
            )
