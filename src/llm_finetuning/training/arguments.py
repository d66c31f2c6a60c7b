"""Config sections -> TRL's SFTConfig / GRPOConfig, in one place, so the same config trains the same way on
every backend.

A section's TRL fields (set by their own names, ``config/trl_fields.py``) go to TRL as they are, in one loop,
except those the pipeline reads and resolves (``READ_HERE``); what is ours alone, or computed, is set explicitly
below with the reason. Precision, device, the optimizer and activation checkpointing follow the hardware rules in
``model/hardware.py``, never TRL's defaults: TRL 1.x turns bf16 and gradient checkpointing on by default, which
fails or wastes time on a CPU.

Unsloth's compiled GRPO trainer rewrites settings left unset or set to what it considers a mistake (its
``models/rl.py``): a null ``epsilon_high`` becomes 0.28 under dapo and 5.0 under cispo, dapo masks truncated
completions, dr_grpo turns reward scaling off, the vLLM importance-sampling correction is off by default, a
model with an engine forces ``use_vllm``/colocate/its sleep mode. ``grpo_arguments`` therefore passes every one
of them explicitly, resolved the same way for both backends, and ``check_trainer_settings`` refuses up front a
config whose choice a backend would override (``Backend.check_config``). Whatever differs by backend is asked of
the run's ``Backend`` object, and what the run decided (rollouts, the importance-sampling correction) is read from
its ``RunPlan`` (``plan.py``), decided once. What the trainer finally used is read back from the built trainer
(``trainer_settings``) and recorded in ``summary.json``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..config import GRPOTrainingConfig, PipelineConfig, SFTTrainingConfig
from ..model.hardware import optimizer
from ..schema import ConfigError, closest
from ..session.plan import RunPlan

__all__ = ["CISPO_EPSILON_HIGH", "GRPO_SETTINGS", "SFT_SETTINGS", "check_trainer_settings", "grpo_arguments",
           "passed_on", "sft_arguments", "trainer_settings"]  # fmt: skip

# TRL's fields the pipeline reads from the section and resolves itself before passing them on (see
# grpo_arguments): use_vllm, max_completion_length and the importance-sampling correction are resolved from the
# plan and the data, the vLLM engine settings only apply to an engine, sampling goes to vLLM's or generate's
# conventions, activation checkpointing and the optimizer follow the hardware rules, and the rest are resolved
# against Unsloth's rewrites. A config may set them; the pipeline passes what they resolve to.
READ_HERE = frozenset({"use_vllm", "max_completion_length", "vllm_mode", "vllm_enable_sleep_mode",
                       "vllm_gpu_memory_utilization", "vllm_importance_sampling_correction", "epsilon_high",
                       "scale_rewards", "mask_truncated_completions", "beta", "optim", "gradient_checkpointing",
                       "temperature", "top_p", "top_k", "min_p"})
# Where to set what the pipeline decides from another part of the config (a TRL field of that name is refused).
SET_ELSEWHERE = {
    "seed": "set seed (top level)", "report_to": "set report_to (top level)", "run_name": "set run_name (top level)",
    "output_dir": "set output_dir (top level)", "bf16": "set model.dtype", "fp16": "set model.dtype",
    "max_length": "set model.max_seq_length", "dataset_num_proc": "set data.num_proc",
    "eval_strategy": "evaluations during GRPO are ours: set evaluation.grpo_every_steps",
    "eval_steps": "evaluations during GRPO are ours: set evaluation.grpo_every_steps",
    "reward_weights": "set each reward's weight in rewards.rewards",
    "multi_objective_aggregation": "set grpo_training.advantages (normalize_then_sum)",
}  # fmt: skip
# CISPO clamps the importance weight at epsilon_high itself (not 1 + epsilon_high), so TRL's fallback to
# epsilon (0.2) would cap every weight below 1; 5.0 is the ScaleRL paper's value, which Unsloth also sets.
CISPO_EPSILON_HIGH = 5.0

# What summary.json records of each phase's trainer arguments, read back from the built trainer.
SFT_SETTINGS = ("max_steps", "num_train_epochs", "per_device_train_batch_size", "gradient_accumulation_steps",
                "learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay", "optim", "max_grad_norm",
                "bf16", "fp16", "gradient_checkpointing", "max_length", "completion_only_loss", "packing", "seed",
                "parallel_mode", "world_size")
GRPO_SETTINGS = ("max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations",
                 "generation_batch_size", "steps_per_generation", "max_completion_length", "learning_rate",
                 "lr_scheduler_type", "warmup_steps", "weight_decay", "optim", "max_grad_norm", "bf16", "fp16",
                 "gradient_checkpointing", "loss_type", "importance_sampling_level", "beta", "epsilon",
                 "epsilon_high", "scale_rewards", "multi_objective_aggregation", "mask_truncated_completions",
                 "temperature", "top_p", "top_k",
                 "min_p", "reward_weights", "use_vllm", "vllm_mode", "vllm_enable_sleep_mode",
                 "vllm_importance_sampling_correction", "vllm_importance_sampling_mode", "seed",
                 "parallel_mode", "world_size")  # fmt: skip  (the last two: whether the trainer wraps the model in DDP)


def passed_on(section: SFTTrainingConfig | GRPOTrainingConfig) -> dict[str, Any]:
    """The section's TRL fields (our defaults, then the config's) that go to TRL as they are."""
    return {name: value for name, value in section.trl_settings().items() if name not in READ_HERE}


def common_arguments(
    config: PipelineConfig, section: SFTTrainingConfig | GRPOTrainingConfig, output_dir: Path, plan: RunPlan
) -> dict[str, Any]:
    """What both phases set beyond their section: output, checkpoints, seed, tracker, hardware."""
    checkpointing = plan.backend.trainer_checkpointing(config.model, section.gradient_checkpointing)
    phase = "sft_training" if isinstance(section, SFTTrainingConfig) else "grpo_training"
    return {
        "output_dir": str(output_dir),
        "save_strategy": "steps",
        "seed": config.seed,
        "report_to": list(config.report_to),
        "run_name": f"{config.tracker_run_name}-{phase.split('_')[0]}",
        "gradient_checkpointing": checkpointing,
        "gradient_checkpointing_kwargs": {"use_reentrant": False} if checkpointing else None,
        "use_cpu": not plan.cuda,
        "eval_strategy": "no",  # our own evaluation callback generates and grades; see training/grpo.py
        "optim": optimizer(section.optim, f"{phase}.optim"),
        "bf16": plan.precision.bf16,  # the run's precision (RunPlan), decided once
        "fp16": plan.precision.fp16,
    }


def sft_arguments(config: PipelineConfig, output_dir: Path, plan: RunPlan, passed_through: bool = True,
                  ) -> dict[str, Any]:  # fmt: skip
    """SFTConfig's arguments: the section's TRL fields, then what the pipeline decides (``passed_through=False``:
    only the latter, which ``check_trainer_settings`` keeps the config from setting)."""
    section = config.sft_training
    return {
        **(passed_on(section) if passed_through else {}),
        **common_arguments(config, section, output_dir, plan),
        "max_length": config.model.max_seq_length,
        "completion_only_loss": True,  # learn the answer format, not to echo the prompt
        "packing": False,
        "dataset_num_proc": config.data.num_proc,
    }


def check_trainer_settings(config: PipelineConfig, plan: RunPlan) -> None:
    """Refuse, before any model loads, a config the trainers would reject or silently override (the plan itself
    refused a correction asked for where it cannot work)."""
    from trl import GRPOConfig, SFTConfig

    plan.backend.check_config(config)
    output = Path(config.output_dir)
    weights = [spec.weight for spec in config.rewards.rewards]
    for section, trl_class, ours in (
        ("sft_training", SFTConfig, sft_arguments(config, output, plan, passed_through=False)),
        ("grpo_training", GRPOConfig, grpo_arguments(config, output, plan, 1, weights, passed_through=False)),
    ):
        check_passed_through(section, getattr(config, section), trl_class, ours)


def check_passed_through(name: str, section: Any, trl_class: type, ours: dict[str, Any]) -> None:
    """A section's TRL fields must be fields of the installed (and imported: Unsloth's, where it compiles its own)
    TRL class, and not ones the pipeline sets from elsewhere in the config or from the machine."""
    fields = {field.name for field in dataclasses.fields(trl_class)}
    for key in section.trl:
        if key not in fields:
            match = closest(key, fields)
            hint = f"did you mean {match}?" if match else f"see TRL's {trl_class.__name__}"
            raise ConfigError(f"{name}.{key}: not a field of TRL's {trl_class.__name__}; {hint}")
        if key in ours and key not in READ_HERE:
            where = SET_ELSEWHERE.get(key, "docs/architecture.md names the setting that decides it")
            raise ConfigError(f"{name}.{key}: the pipeline sets it itself (to {ours[key]!r}, from the config and "
                              f"the machine); {where}")  # fmt: skip


def grpo_arguments(
    config: PipelineConfig, output_dir: Path, plan: RunPlan, max_completion_length: int,
    reward_weights: list[float], passed_through: bool = True,
) -> dict[str, Any]:
    """GRPOConfig's arguments: the section's TRL fields, then what the pipeline decides (``passed_through=False``:
    only the latter, which ``check_trainer_settings`` keeps the config from setting)."""
    from trl import GRPOConfig

    section, sampling = config.grpo_training, config.rollout_sampling
    use_vllm = plan.uses_vllm
    arguments = {
        **(passed_on(section) if passed_through else {}),
        **common_arguments(config, section, output_dir, plan),
        "max_completion_length": max_completion_length,  # configured, or computed from the data
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        # "off" is -1 for vLLM (Unsloth rewrites 0 to it) and 0 for model.generate; ours is -1
        "top_k": sampling.top_k if sampling.top_k > 0 else (-1 if use_vllm else 0),
        "min_p": sampling.min_p or None,
        "reward_weights": reward_weights,
        # TRL normalises within groups after summing (ours: sum, and gated, which replaces the result) or before
        "multi_objective_aggregation": "normalize_then_sum" if section.advantages == "normalize_then_sum"
        else "sum_then_normalize",
        "use_vllm": use_vllm,
        "log_completions": False,
        **resolved_against_unsloth(section, unsloth_compiled=hasattr(GRPOConfig, "_unsloth_patched_rl_config")),
        "vllm_importance_sampling_correction": plan.importance.correction,
        **plan.rollout.trl_arguments(config),  # TRL's own engine; Unsloth brings its engine with the model
    }
    if use_vllm:
        arguments.update(vllm_mode=section.vllm_mode, vllm_enable_sleep_mode=section.vllm_enable_sleep_mode)
    return arguments


def resolved_against_unsloth(section: GRPOTrainingConfig, unsloth_compiled: bool) -> dict[str, Any]:
    """The settings Unsloth's compiled GRPOConfig would rewrite, resolved to one meaning for both backends (the
    importance-sampling correction, off by default in Unsloth, is set by ``grpo_arguments`` from its rule).

    ``unsloth_compiled``: ``trl.GRPOConfig`` is Unsloth's compiled class (it replaces TRL's on CUDA, under TRL's
    name); its one sentinel is needed for dr_grpo with group scaling, which it otherwise turns off.
    """
    epsilon_high = section.epsilon_high
    if epsilon_high is None:  # TRL reads null as epsilon; Unsloth as 0.28 (dapo) or 5.0 (cispo)
        epsilon_high = CISPO_EPSILON_HIGH if section.loss_type == "cispo" else section.epsilon
    scale_rewards: str | None = section.scale_rewards
    if unsloth_compiled and section.loss_type == "dr_grpo" and scale_rewards == "group":
        scale_rewards = None  # Unsloth's "keep group scaling" (it rewrites an explicit "group" to "none" here)
    return {
        "epsilon_high": epsilon_high,
        "scale_rewards": scale_rewards,
        "mask_truncated_completions": section.mask_truncated_completions,  # Unsloth: True under dapo if unset
        "beta": section.beta,  # Unsloth: 0.001 for losses other than dapo/dr_grpo if unset
    }


def trainer_settings(trainer: Any, names: tuple[str, ...], passed_through: Any = ()) -> dict[str, Any]:
    """The named settings (and the ``trl`` fields passed through) as the built trainer will use them (after every
    library's rewrites), JSON-ready."""
    args = trainer.args
    settings = {name: _plain(getattr(args, name, None)) for name in (*names, *passed_through)}
    if "epsilon_high" in settings and hasattr(trainer, "epsilon_high"):
        settings["epsilon_high"] = _plain(trainer.epsilon_high)  # the trainer resolves a null to epsilon
    return settings


def _plain(value: Any) -> Any:
    value = getattr(value, "value", value)  # enums such as OptimizerNames
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
