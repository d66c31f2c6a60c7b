"""What a config asks of the layers above it, checked before any model loads: the config package knows its own
fields only (it is the ground floor), so the names it refers to are checked against their owners here.

- ``report_to``: trackers transformers knows (``reporting/trackers.py``);
- ``rewards``: names, weights and parameters the reward registry accepts (``rewards/registry.py``);
- reasoning-gym tasks a dataset names and every task's settings (``tasks/gym.py``), with the closest valid name;
- GRPO's generation batch against TRL's rules with the processes this launch has (``config/batch_rules.py``).

``pipeline.run`` and every tool (``tools/common.config_from``) call ``check_config`` first; each problem is a
one-line ``ConfigError``.
"""

from __future__ import annotations

from ..config import PipelineConfig
from ..config.batch_rules import grpo_batch
from ..config.data import DataConfig
from ..errors import PipelineError
from ..schema import ConfigError, closest, require

__all__ = ["check_config"]


def check_config(config: PipelineConfig) -> PipelineConfig:
    """``config``, once the names it refers to exist and its GRPO batch suits this launch (else a ConfigError)."""
    _check_trackers(config.report_to)
    _check_rewards(config)
    _check_estimator(config.grpo_training.advantages)
    _check_line_credit(config.grpo_training.line_credit)
    _check_tasks(config.data)
    _check_generation_batch(config)
    return config


def _check_trackers(names: list[str]) -> None:
    from ..reporting.trackers import TRACKERS

    for name in names:
        if name not in TRACKERS:
            match = closest(name, TRACKERS)
            raise ConfigError(f"report_to: unknown tracker {name!r}; " + (f"did you mean {match}?" if match else
                              f"known: {', '.join(TRACKERS)}"))  # fmt: skip


def _check_rewards(config: PipelineConfig) -> None:
    from ..rewards import validate_reward_specs

    try:
        validate_reward_specs(config.rewards.rewards)
    except ValueError as exc:
        raise ConfigError(f"rewards: {exc}") from None
    _check_answer_only(config)


def _check_line_credit(name: str | None) -> None:
    from ..grading.lines import LINE_CHECKS

    if name is not None and name not in LINE_CHECKS:
        match = closest(name, LINE_CHECKS)
        raise ConfigError(f"grpo_training.line_credit: unknown line check {name!r}; " + (
            f"did you mean {match}?" if match else f"known: {', '.join(LINE_CHECKS)} (grading/lines.py), or null"))


def _check_estimator(name: str) -> None:
    from ..rewards.estimators import ESTIMATORS

    if name not in ESTIMATORS:
        match = closest(name, ESTIMATORS)
        raise ConfigError(f"grpo_training.advantages: unknown advantage estimator {name!r}; " + (
            f"did you mean {match}?" if match else f"known: {', '.join(ESTIMATORS)} (rewards/estimators.py)"))


def _check_answer_only(config: PipelineConfig) -> None:
    """Answer-only GRPO data has no worked solution: nothing may ask for one (``data.grpo.answer_only``)."""
    from ..rewards import REWARDS
    from ..tasks.workings import WORKED_COLUMN

    require(not config.data.sft.answer_only, "data.sft.answer_only",
            "SFT learns from worked solutions; answer_only applies to data.grpo")  # fmt: skip
    if not config.data.grpo.answer_only:
        return
    require(not config.grpo_training.guidance, "grpo_training.guidance",
            "guidance writes worked solutions into groups, and data.grpo.answer_only has none: set it false")  # fmt: skip
    for spec in config.rewards.rewards:
        reward = REWARDS.get(spec.name)
        require(reward is None or reward.gold_column != WORKED_COLUMN, "rewards",
                f"{spec.name} scores against a worked solution, and data.grpo.answer_only has none: remove it")  # fmt: skip


def _check_tasks(data: DataConfig) -> None:
    """The reasoning-gym tasks the datasets name, and every task's settings (reasoning-gym is imported only when
    a dataset names a task)."""
    from ..tasks import gym

    named = {key: gym.task_of(spec.name) for key, spec in (("sft", data.sft), ("grpo", data.grpo))}
    if not any(named.values()):
        return
    problem = gym.package_problem()
    key, task = next((key, task) for key, task in named.items() if task)
    require(problem is None, f"data.{key}.name", f"{gym.PREFIX}{task} {problem}")
    for key, task in named.items():
        if task:
            gym.check_task(task, {}, f"data.{key}.name")
    for name, values in data.reasoning_gym.settings.items():
        gym.check_task(name, values, f"data.reasoning_gym.settings.{name}")
    for key, spec in (("sft", data.sft), ("grpo", data.grpo)):
        task = named[key]
        if task and spec.train_settings is not None:
            merged = {**data.reasoning_gym.settings.get(task, {}), **spec.train_settings}
            gym.check_task(task, merged, f"data.{key}.train_settings")


def _check_generation_batch(config: PipelineConfig) -> None:
    """TRL's generation-batch rules with the number of processes this launch has (WORLD_SIZE; 1 without one)."""
    from ..runtime.distributed import read_launch

    section = config.grpo_training
    try:
        grpo_batch(section.per_device_train_batch_size, section.gradient_accumulation_steps,
                   section.num_generations, read_launch().world_size)
    except PipelineError as exc:
        raise ConfigError(str(exc)) from None
