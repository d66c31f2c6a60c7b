"""The GPU memory estimate: parameter counts checked against real models, and verdicts on the default config."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from llm_finetuning.config import ConfigError, PipelineConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model.memory import GIB, estimate_memory, model_shape, parse_size

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default_config.yaml"
TINY = ROOT / "configs" / "tiny.yaml"
SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _apply(config: PipelineConfig, suggestion: str) -> PipelineConfig:
    words = shlex.split(suggestion.removesuffix(" (not enough alone)"))
    return config.with_overrides([word for word in words if word != "--set"])


def _tiny_model(config: PipelineConfig):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tiny = config.model.tiny
    return Qwen3ForCausalLM(Qwen3Config(
        vocab_size=tiny.vocab_size, hidden_size=tiny.hidden_size, intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.num_hidden_layers, num_attention_heads=tiny.num_attention_heads,
        num_key_value_heads=tiny.num_key_value_heads, head_dim=tiny.hidden_size // tiny.num_attention_heads,
        tie_word_embeddings=True,
    ))  # fmt: skip


def test_the_tiny_models_parameter_counts_match_a_real_model_with_and_without_lora():
    from peft import LoraConfig, get_peft_model

    config = PipelineConfig.from_yaml(TINY)
    shape, model = model_shape(config), _tiny_model(config)
    assert shape.parameters == sum(p.numel() for p in model.parameters())
    lora = LoraConfig(r=8, target_modules=SEVEN, modules_to_save=["embed_tokens"], ensure_weight_tying=True)
    peft_model = get_peft_model(model, lora)
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert shape.lora_parameters(8, SEVEN, ["embed_tokens"]) == trainable


def test_a_local_models_shape_comes_from_its_config_json(tmp_path):
    tiny = PipelineConfig.from_yaml(TINY)
    _tiny_model(tiny).config.save_pretrained(tmp_path)
    local = tiny.with_overrides([f"model.model_name={tmp_path}"])
    assert model_shape(local) == model_shape(tiny)


def test_the_default_models_counts_are_the_ones_unsloth_prints_for_it():
    shape = model_shape(PipelineConfig.from_yaml(DEFAULT))
    # Unsloth on Qwen3-4B-Base, LoRA r=32 on the seven projections: "66,060,288 / 4,088,528,384 (1.62%)"
    assert shape.parameters == 4_022_468_096
    assert shape.lora_parameters(32, SEVEN, []) == 66_060_288


@pytest.mark.parametrize(
    ("overrides", "weights"),
    [
        (["model.backend=hf"], 4_022_468_096 * 2),
        (["model.backend=hf", "model.dtype=float32"], 4_022_468_096 * 4),
        (["model.backend=hf", "model.load_in_4bit=true"], int(3_633_315_840 * 0.52 + 389_152_256 * 2)),
    ],
)
def test_the_weights_term_follows_the_precision(overrides, weights):
    estimate = estimate_memory(PipelineConfig.from_yaml(DEFAULT, overrides), parse_size("80GiB"))
    assert {phase.parts["weights"] for phase in estimate.phases} == {weights}


@pytest.mark.parametrize("gpu", ["16GiB", "24GiB", "80GiB"])
def test_the_default_config_fits_a_16_gib_gpu_and_up_with_unsloths_shared_engine(gpu):
    estimate = estimate_memory(PipelineConfig.from_yaml(DEFAULT), parse_size(gpu))
    assert estimate.backend == "unsloth" and estimate.fits and estimate.suggestion is None
    for phase in estimate.phases:  # the engine holds the weights training uses: they are not counted twice
        assert phase.parts["weights"] == 0 and phase.parts["vllm engine"] == int(0.7 * parse_size(gpu))
    assert estimate.lines()[-1] == "fits"


def test_on_8_gib_the_engine_cannot_hold_16_bit_weights_and_4_bit_comes_first():
    estimate = estimate_memory(PipelineConfig.from_yaml(DEFAULT), parse_size("8GiB"))
    assert not estimate.fits and estimate.engine_shortfall > 0
    assert estimate.suggestion.startswith("--set model.load_in_4bit=true")
    assert estimate.lines()[-1].startswith("does not fit; first change: --set model.load_in_4bit=true")


def test_the_hf_backend_with_trls_engine_needs_a_second_copy_with_its_own_share():
    config = PipelineConfig.from_yaml(DEFAULT, ["model.backend=hf"])
    estimate = estimate_memory(config, parse_size("24GiB"))
    sft, grpo = estimate.phases
    # TRL's engine holds a second copy of the weights: its share is its own (TRL's 0.3), not Unsloth's 0.7
    assert "vllm engine" not in sft.parts and grpo.parts["vllm engine"] == int(0.3 * 24 * GIB)
    assert grpo.parts["weights"] == 4_022_468_096 * 2 and not estimate.fits
    assert estimate.suggestion.startswith("--set grpo_training.vllm_gpu_memory_utilization=")
    assert estimate_memory(_apply(config, estimate.suggestion), parse_size("24GiB")).fits


@pytest.mark.parametrize(("engine", "counted"), [("auto", True), ("vllm", True), ("hf", False)])
def test_an_engine_kept_for_grpos_evaluations_counts_in_grpo_and_never_in_sft(engine, counted):
    """GRPO on model.generate, evaluation on vLLM: the run keeps an evaluation engine through GRPO (its periodic
    evaluations) and shuts it down after every evaluation outside GRPO, so SFT holds none."""
    config = PipelineConfig.from_yaml(DEFAULT, ["model.backend=hf", "grpo_training.use_vllm=false",
                                                f"evaluation.engine={engine}"])  # fmt: skip
    sft, grpo = estimate_memory(config, parse_size("80GiB")).phases
    assert "vllm engine" not in sft.parts
    assert grpo.parts.get("vllm engine", 0) == (int(0.3 * 80 * GIB) if counted else 0)
    without_periodic = config.with_overrides(["evaluation.grpo_every_steps=null"])
    assert "vllm engine" not in estimate_memory(without_periodic, parse_size("80GiB")).phases[1].parts


def test_without_gradient_checkpointing_the_first_change_is_to_turn_it_on():
    config = PipelineConfig.from_yaml(DEFAULT, ["model.gradient_checkpointing=false"])
    estimate = estimate_memory(config, parse_size("24GiB"))
    assert not estimate.fits and estimate.suggestion == "--set model.gradient_checkpointing=true"
    on = dataclasses.replace(config.model, gradient_checkpointing=True)
    assert estimate_memory(config.replace(model=on), parse_size("24GiB")).fits


def test_the_tiny_demo_is_tiny():
    estimate = estimate_memory(PipelineConfig.from_yaml(TINY), parse_size("8GiB"))
    assert estimate.backend == "hf" and estimate.fits
    assert all(phase.total - phase.parts["cuda"] - phase.parts.get("vllm engine", 0) < 0.5 * GIB
               for phase in estimate.phases)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "size"), [("24GiB", 24 * GIB), ("80 GB", 80 * 10**9), ("16", 16 * GIB), ("1.5gib", int(1.5 * GIB))]
)
def test_gpu_sizes_parse_with_their_unit(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["24 parsecs", "", "GiB", "-3GiB"])
def test_a_gpu_size_without_a_known_unit_is_a_one_line_config_error(text):
    with pytest.raises(ConfigError, match="give a size such as 24GiB, 80GB or 16"):
        parse_size(text)


def test_an_unknown_hub_model_names_the_offline_fix():
    config = PipelineConfig.from_yaml(DEFAULT, ["model.model_name=someone/unknown-7b"])
    with pytest.raises(ModelError, match="point model_name at a local directory with its config.json"):
        estimate_memory(config, parse_size("24GiB"))


def test_the_builtin_smollm2s_counts_are_its_real_ones():
    """134,515,008 parameters: what transformers counts on the converted SmolLM2-135M-Instruct (tied head)."""
    config = PipelineConfig.from_dict({"model": {"model_name": "builtin:smollm2-135m-instruct"}})
    assert model_shape(config).parameters == 134_515_008
