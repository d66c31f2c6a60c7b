"""The same config trains the same way on both backends: the settings Unsloth would rewrite, the hardware rules
(precision, optimizer) and the up-front refusals, all without a model.

Unsloth's compiled GRPO trainer rewrites what it finds unset or disagrees with (``unsloth/models/rl.py``);
``grpo_arguments`` passes each of those settings explicitly. The Unsloth lane (``tests/test_unsloth_lane.py``)
checks the same arguments against Unsloth's real compiled config class.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import plan_for

from llm_finetuning.config import ConfigError, ModelConfig, PipelineConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model import get_backend
from llm_finetuning.model.hardware import Precision, optimizer
from llm_finetuning.training.arguments import (
    CISPO_EPSILON_HIGH,
    check_trainer_settings,
    grpo_arguments,
    resolved_against_unsloth,
    sft_arguments,
    trainer_settings,
)


@pytest.fixture
def cuda(monkeypatch):
    """A CUDA machine as far as torch's queries tell; ``cuda(bf16=False)`` for a GPU without bf16."""

    def claim(bf16: bool = True) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)

    return claim


@pytest.fixture
def cpu(monkeypatch):
    """A CPU machine without bf16 arithmetic; ``cpu_with_bf16`` for one that has it."""
    from llm_finetuning.model import hardware

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(hardware, "cpu_computes_bf16", lambda: False)


@pytest.fixture
def cpu_with_bf16(monkeypatch, cpu):
    from llm_finetuning.model import hardware

    monkeypatch.setattr(hardware, "cpu_computes_bf16", lambda: True)


TRL_LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")  # TRL 1.15's loss_type


def grpo_section(**values):
    return PipelineConfig.from_dict({"grpo_training": {"num_generations": 2, **values}}).grpo_training


@pytest.mark.parametrize("loss_type", TRL_LOSS_TYPES)
def test_a_null_epsilon_high_means_epsilon_for_every_loss_but_cispo(loss_type):
    # Unsloth would turn null into 0.28 under dapo; TRL into epsilon (0.2), which under cispo caps every weight < 1
    resolved = resolved_against_unsloth(grpo_section(loss_type=loss_type), unsloth_compiled=True)
    assert resolved["epsilon_high"] == (CISPO_EPSILON_HIGH if loss_type == "cispo" else 0.2)
    explicit = 6.0 if loss_type == "cispo" else 0.3
    assert resolved_against_unsloth(grpo_section(loss_type=loss_type, epsilon_high=explicit), False)[
        "epsilon_high"] == explicit  # fmt: skip


def test_settings_unsloth_would_default_differently_are_always_passed():
    resolved = resolved_against_unsloth(grpo_section(loss_type="dapo"), unsloth_compiled=True)
    assert resolved["mask_truncated_completions"] is False  # Unsloth: True under an explicit dapo when unset
    assert resolved["beta"] == 0.0 and resolved["scale_rewards"] == "group"


@pytest.mark.parametrize(("compiled", "scale"), [(True, None), (False, "group")])
def test_dr_grpo_keeps_group_scaling_through_unsloths_sentinel(compiled, scale):
    # Unsloth rewrites dr_grpo's explicit "group" to "none"; its "keep scaling" is None (then read as group)
    resolved = resolved_against_unsloth(grpo_section(loss_type="dr_grpo"), unsloth_compiled=compiled)
    assert resolved["scale_rewards"] == scale
    assert resolved_against_unsloth(grpo_section(loss_type="dr_grpo", scale_rewards="none"), compiled)[
        "scale_rewards"] == "none"  # fmt: skip


def test_cispo_with_an_epsilon_high_below_one_is_refused():
    with pytest.raises(ConfigError, match="cispo caps the importance weight at epsilon_high itself") as info:
        grpo_section(loss_type="cispo", epsilon_high=0.2)
    assert "\n" not in str(info.value)
    assert grpo_section(loss_type="cispo", epsilon_high=6.0).epsilon_high == 6.0


@pytest.mark.usefixtures("cpu")
def test_grpo_arguments_on_a_cpu_pass_every_resolved_setting(tmp_path):
    config = PipelineConfig.from_dict({"grpo_training": {"num_generations": 2, "loss_type": "cispo", "top_k": -1}})
    arguments = grpo_arguments(config, tmp_path, plan_for(config, "hf"), 64, [1.0])
    assert arguments["epsilon_high"] == CISPO_EPSILON_HIGH and arguments["top_k"] == 0  # 0 = off for generate
    assert arguments["optim"] == "adamw_torch_fused"  # what Unsloth's CPU mode would swap in
    assert {"use_vllm": False, "bf16": False, "fp16": False} == {k: arguments[k] for k in ("use_vllm", "bf16", "fp16")}
    vllm = config.with_overrides(["grpo_training.use_vllm=true"])
    with_vllm = grpo_arguments(vllm, tmp_path, plan_for(vllm), 64, [1.0])
    assert with_vllm["top_k"] == -1 and with_vllm["vllm_mode"] == "colocate"  # vLLM's (and Unsloth's) off


@pytest.mark.parametrize(
    ("name", "on_cuda", "has_bitsandbytes", "expected"),
    [
        ("adamw_torch", False, False, "adamw_torch_fused"),
        ("adamw_8bit", False, False, "adamw_torch_fused"),
        ("paged_adamw_32bit", False, True, "adamw_torch_fused"),
        ("sgd", False, False, "sgd"),
        ("adamw_torch", True, False, "adamw_torch"),
        ("adamw_8bit", True, True, "adamw_8bit"),
    ],
)
def test_the_optimizer_rule(monkeypatch, name, on_cuda, has_bitsandbytes, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: on_cuda)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda mod, *a: (real("json") if has_bitsandbytes else None) if mod == "bitsandbytes" else real(mod, *a))
    assert optimizer(name, "sft_training.optim") == expected


def test_an_8bit_optimizer_on_cuda_without_bitsandbytes_is_refused_before_anything_loads(monkeypatch, cuda):
    cuda()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda mod, *a: None if mod == "bitsandbytes" else real(mod, *a))
    config = PipelineConfig.from_yaml("configs/default_config.yaml")  # optim: adamw_8bit in both phases
    with pytest.raises(ConfigError) as info:
        check_trainer_settings(config, plan_for(config, "hf"))
    assert str(info.value) == (
        "sft_training.optim: adamw_8bit needs bitsandbytes, which is not installed; install the gpu extra "
        "(uv sync --extra gpu) or set sft_training.optim=adamw_torch"
    )


@pytest.mark.parametrize(
    ("dtype", "lora", "bf16_gpu", "weights", "flags"),
    [
        ("auto", True, True, torch.bfloat16, (True, False)),
        ("auto", False, True, torch.bfloat16, (False, False)),  # bf16 full fine-tuning: no autocast, as Unsloth
        ("float32", True, True, torch.float32, (True, False)),  # fp32 weights autocast to bf16, as Unsloth
        ("float32", False, True, torch.float32, (True, False)),
        ("auto", True, False, torch.float16, (False, True)),
        ("auto", False, False, torch.float32, (False, True)),  # fp32 master weights under fp16 autocast
    ],
)
def test_precision_on_cuda_follows_one_rule(cuda, dtype, lora, bf16_gpu, weights, flags):
    cuda(bf16=bf16_gpu)
    precision = Precision.resolve(ModelConfig(dtype=dtype, lora=ModelConfig().lora if lora else None), cuda=True)
    assert precision.weights == weights
    assert (precision.bf16, precision.fp16) == flags


@pytest.mark.parametrize(
    ("dtype", "lora", "bf16_cpu", "weights", "autocast", "reason"),
    [
        ("auto", True, True, torch.bfloat16, True, "auto: this CPU computes bf16 natively; LoRA trains on bf16"),
        ("auto", True, False, torch.float32, False, "auto: this CPU has no native bf16 arithmetic, so fp32"),
        ("auto", False, True, torch.float32, False, "auto: full fine-tuning on a CPU keeps fp32 weights"),
        ("float32", True, True, torch.float32, False, "model.dtype: float32 was asked for"),  # the tiny demo's
        ("bfloat16", True, False, torch.bfloat16, True, "model.dtype: bfloat16 was asked for"),
        ("bfloat16", False, True, torch.bfloat16, False, "model.dtype: bfloat16 was asked for"),
    ],
)
def test_the_cpu_precision_rule(monkeypatch, cpu, dtype, lora, bf16_cpu, weights, autocast, reason):
    from llm_finetuning.model import hardware

    monkeypatch.setattr(hardware, "cpu_computes_bf16", lambda: bf16_cpu)
    precision = Precision.resolve(ModelConfig(dtype=dtype, lora=ModelConfig().lora if lora else None), cuda=False)
    assert precision.weights == weights
    assert (precision.bf16, precision.fp16) == (autocast, False)
    record = precision.record()
    assert (record["weights"], record["autocast"]) == (str(weights).removeprefix("torch."), "bf16" if autocast else None)
    assert record["reason"].startswith(reason)


@pytest.mark.usefixtures("cpu_with_bf16")
def test_every_part_of_a_run_reads_the_one_precision_the_plan_decided():
    """The plan decides the weights' dtype and the autocast once; the model manager, the engine owner and the
    trainers' arguments are given it (no part asks the config and the device again)."""
    from llm_finetuning.session import Session

    config = PipelineConfig.from_dict({"model": {"model_name": "builtin:tiny-qwen3", "backend": "hf"}})
    session = Session.open(config)
    assert session.plan.precision.weights == torch.bfloat16 and session.plan.precision.bf16  # LoRA on a bf16 CPU
    assert session.manager.precision is session.plan.precision
    assert session.engines.dtype == "bfloat16"
    arguments = sft_arguments(config, Path("out"), session.plan)
    assert (arguments["bf16"], arguments["fp16"]) == (True, False)


def _unsloth_engine_config(*overrides: str) -> PipelineConfig:
    return PipelineConfig.from_yaml("configs/default_config.yaml", ["sft_training.optim=adamw_torch",
                                                                    "grpo_training.optim=adamw_torch", *overrides])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["grpo_training.vllm_mode=server"], "grpo_training.vllm_mode: server, but Unsloth generates with its own"),
        (["sft_training.gradient_checkpointing=false"],  # Unsloth's checkpointing is the model's, for both phases
         "sft_training.gradient_checkpointing: false, but Unsloth builds its activation checkpointing into the model"),
        (["grpo_training.line_credit=equations"], "line_credit gives advantages per token, and Unsloth's compiled"),
        (["grpo_training.sft_anchor=1.0"], "sft_anchor adds a second forward pass .* Unsloth's compiled GRPO"),
    ],
)
def test_choices_unsloths_engine_would_override_are_refused_up_front(cuda, overrides, message):
    cuda()
    config = _unsloth_engine_config(*overrides)
    with pytest.raises(ConfigError, match=message):
        check_trainer_settings(config, plan_for(config, "unsloth"))
    check_trainer_settings(config, plan_for(config, "hf"))  # TRL's own engine takes either


@pytest.mark.usefixtures("cpu")
def test_use_vllm_with_unsloth_but_no_engine_is_refused():
    asked = _unsloth_engine_config("grpo_training.use_vllm=true")
    with pytest.raises(ConfigError, match="use_vllm: true, but Unsloth's vLLM engine cannot start here: no CUDA GPU"):
        check_trainer_settings(asked, plan_for(asked, "unsloth"))
    default = _unsloth_engine_config()
    check_trainer_settings(default, plan_for(default, "unsloth"))  # the default (null) is fine


class GRPOTrainer:  # stands in for TRL's class: the guard reads only the class names
    pass


class UnslothGRPOTrainer(GRPOTrainer):
    pass


def test_on_cuda_the_unsloth_backend_must_get_unsloths_compiled_trainer(cuda):
    cuda()
    get_backend("unsloth").check_trainer(UnslothGRPOTrainer())
    get_backend("hf").check_trainer(GRPOTrainer())
    with pytest.raises(ModelError, match="the unsloth backend built TRL's own GRPOTrainer: Unsloth could not patch it"):
        get_backend("unsloth").check_trainer(GRPOTrainer())


@pytest.mark.usefixtures("cpu")
def test_unsloths_cpu_mode_trains_with_trls_own_trainers_on_purpose():
    get_backend("unsloth").check_trainer(GRPOTrainer())


def test_settings_are_read_back_from_the_built_trainer_as_plain_values(tmp_path):
    from trl import GRPOConfig

    config = PipelineConfig.from_dict({"grpo_training": {"num_generations": 2}})
    args = GRPOConfig(**grpo_arguments(config, tmp_path, plan_for(config, "hf"), 64, [1.0, 2.0]))
    trainer = SimpleNamespace(args=args, epsilon_high=0.2)
    settings = trainer_settings(trainer, ("optim", "epsilon_high", "reward_weights", "loss_type", "missing"))
    assert settings == {"optim": args.optim.value, "epsilon_high": 0.2, "reward_weights": [1.0, 2.0],
                        "loss_type": "dapo", "missing": None}  # fmt: skip


@pytest.mark.usefixtures("cpu")
def test_sft_arguments_take_the_optimizer_rule(tmp_path):
    assert sft_arguments(PipelineConfig(), tmp_path, plan_for(PipelineConfig()))["optim"] == "adamw_torch_fused"
