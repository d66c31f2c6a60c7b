"""Backend choice: auto picks hf on CPU and says why; impossible choices fail with a one-line fix."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from llm_finetuning.config import ConfigError, LoraSettings, ModelConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model import BACKENDS, TINY_MODEL_NAME, choose_backend, get_backend


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def cuda_without_unsloth(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "unsloth" else real_find_spec(name, *a)
    )


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize(
    ("model_config", "expected"),
    [
        (
            ModelConfig(backend="auto"),
            ("hf", "auto: no CUDA GPU, and unsloth needs one; using transformers + peft"),
        ),
        (ModelConfig(backend="hf"), ("hf", "model.backend: hf was asked for")),
    ],
)
def test_choice_on_a_cpu_machine(model_config, expected):
    assert choose_backend(model_config) == expected


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize(
    ("model_config", "fix"),
    [
        (
            ModelConfig(backend="unsloth"),
            r"unsloth needs a CUDA GPU; use backend: hf \(or auto\) on this machine",
        ),
        (ModelConfig(backend="auto", load_in_4bit=True), "set load_in_4bit: false on this machine"),
        (ModelConfig(backend="hf", load_in_4bit=True), "set load_in_4bit: false on this machine"),
    ],
)
def test_impossible_choices_raise_one_line_model_errors(model_config, fix):
    with pytest.raises(ModelError, match=fix) as info:
        choose_backend(model_config)
    assert "\n" not in str(info.value)


@pytest.mark.usefixtures("cuda_without_unsloth")
@pytest.mark.parametrize(
    ("model_config", "expected_name", "reason_part"),
    [
        (ModelConfig(backend="auto"), "hf", "unsloth cannot be imported (not installed)"),
        (ModelConfig(backend="auto", model_name=TINY_MODEL_NAME), "hf", "builtin tiny model"),
    ],
)
def test_auto_on_cuda_falls_back_to_hf_and_says_why(model_config, expected_name, reason_part):
    name, reason = choose_backend(model_config)
    assert name == expected_name and reason_part in reason


@pytest.mark.usefixtures("cuda_without_unsloth")
def test_asking_for_unsloth_when_it_is_missing_names_the_install_command():
    with pytest.raises(ModelError, match=r"uv sync --extra gpu\) or use backend: hf"):
        choose_backend(ModelConfig(backend="unsloth"))


def test_four_bit_full_fine_tuning_is_a_config_error():
    with pytest.raises(ConfigError, match="load_in_4bit"):
        ModelConfig(load_in_4bit=True, lora=None)
    with pytest.raises(ConfigError, match="load_in_4bit"):
        ModelConfig(load_in_4bit=True, lora=LoraSettings(enabled=False))


def test_registry_names_the_valid_backends():
    assert sorted(BACKENDS) == ["hf", "unsloth"]
    assert get_backend("hf").name == "hf"
    with pytest.raises(ModelError, match="unknown backend 'vllm'; valid: hf, unsloth"):
        get_backend("vllm")
