"""ModelManager on the tiny model: LoRA and full fine-tuning, atomic saves, reloads, merged export, free()."""

from __future__ import annotations

import hashlib
import weakref

import pytest
import torch

from llm_finetuning.config import PipelineConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model import ModelManager, adapters
from llm_finetuning.model.hardware import gradient_checkpointing
from llm_finetuning.session import Session

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "intermediate_size": 64}  # fmt: skip
LORA = {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"]}


def tiny_config(output_dir, lora=LORA) -> PipelineConfig:
    model = {
        "model_name": "builtin:tiny-qwen3",
        "backend": "hf",
        "max_seq_length": 128,
        "tiny": TINY,
        "lora": lora,
        "dtype": "float32",  # exact comparisons, also where a GPU would default to bf16
    }
    return PipelineConfig.from_dict({"output_dir": str(output_dir), "model": model})


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("run")  # one tiny base per module: built once, reused from the cache


def loaded(config) -> ModelManager:
    manager = Session.open(config).manager
    manager.load()
    return manager


def perturb(model, seed: int = 0) -> None:
    """Give the trainable weights random values, as training would (fresh LoRA B is zero: a no-op adapter)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(torch.randn(parameter.shape, generator=generator).to(parameter.device) * 0.3)


def logits(manager: ModelManager) -> torch.Tensor:
    inputs = manager.tokenizer(["What is 2 + 3?"], return_tensors="pt").to(manager.model.device)
    with torch.no_grad():
        return manager.model.eval()(**inputs).logits.cpu()


def digest(directory) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_lora_trains_a_fraction_and_the_tokenizer_is_ready_for_generation(output_dir):
    manager = loaded(tiny_config(output_dir))
    trainable, total = manager.parameter_counts()
    assert 0 < trainable < total
    assert (manager.backend.name, manager.uses_lora) == ("hf", True)
    assert manager.model.is_gradient_checkpointing == gradient_checkpointing(manager.config.model)  # tiny.yaml: off
    assert manager.tokenizer.padding_side == "left" and manager.tokenizer.pad_token == "<|endoftext|>"
    assert manager.tokenizer.chat_template.startswith("{%- set system_prompt")


def test_the_runs_seed_initialises_the_adapter_and_nothing_else_does(output_dir):
    def adapter_a(config: PipelineConfig) -> torch.Tensor:
        model = loaded(config).model
        return torch.cat([p.detach().flatten() for n, p in model.named_parameters() if "lora_A" in n])

    config = tiny_config(output_dir)
    first = adapter_a(config)
    torch.manual_seed(123)  # the caller's random state does not reach the adapter's initialisation
    assert torch.equal(first, adapter_a(config))
    assert not torch.equal(first, adapter_a(config.with_overrides(["seed=1"])))
    assert torch.equal(first, adapter_a(config.with_overrides(["data.seed=1"])))  # the problems' seed alone


@pytest.mark.parametrize(
    "lora", [LORA, {**LORA, "modules_to_save": ["embed_tokens"]}], ids=["lora", "lora+embed"]
)
def test_saved_adapter_reloads_to_identical_logits(output_dir, tmp_path, lora):
    trained = loaded(tiny_config(output_dir, lora=lora))
    before = logits(trained)
    perturb(trained.model)
    expected = logits(trained)
    assert not torch.allclose(before, expected)
    trained.save_adapter(tmp_path / "adapter")
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "chat_template.jinja",
        "tokenizer.json",
    } <= set(digest(tmp_path / "adapter"))

    resumed = loaded(tiny_config(output_dir, lora=lora))
    resumed.load_adapter(tmp_path / "adapter")
    assert torch.equal(logits(resumed), expected)
    assert resumed.parameter_counts() == trained.parameter_counts()  # still trainable

    inference = Session.for_inference(tiny_config(output_dir, lora=lora), tmp_path / "adapter").manager
    assert not inference.model.training
    assert torch.equal(logits(inference), expected)


def test_a_save_interrupted_midway_leaves_the_previous_adapter_intact(output_dir, tmp_path, monkeypatch):
    manager = loaded(tiny_config(output_dir))
    perturb(manager.model, seed=1)
    expected = logits(manager)
    target = manager.save_adapter(tmp_path / "adapter")
    saved = digest(target)

    perturb(manager.model, seed=2)
    real_save = manager.tokenizer.save_pretrained

    def crash_after_a_partial_write(directory, *args, **kwargs):
        real_save(directory, *args, **kwargs)
        raise OSError("No space left on device (simulated)")

    monkeypatch.setattr(manager.tokenizer, "save_pretrained", crash_after_a_partial_write)
    with pytest.raises(OSError, match="simulated"):
        manager.save_adapter(target)
    assert digest(target) == saved
    assert [p.name for p in tmp_path.iterdir()] == ["adapter"]  # no staging directory left behind
    fresh = loaded(tiny_config(output_dir))
    fresh.load_adapter(target)
    assert torch.equal(logits(fresh), expected)


def test_a_crash_between_the_two_renames_is_recovered_on_the_next_load(tmp_path):
    target = tmp_path / "adapter"
    with adapters.atomic_directory(target) as staging:
        (staging / "weights").write_text("v1")
    target.rename(tmp_path / ".adapter.previous")  # what a crash after "path -> .path.previous" leaves
    adapters.recover_previous(target)
    assert (target / "weights").read_text() == "v1"
    with adapters.atomic_directory(target) as staging:
        (staging / "weights").write_text("v2")
    assert (target / "weights").read_text() == "v2"
    assert [p.name for p in tmp_path.iterdir()] == ["adapter"]


def test_adapter_with_another_rank_is_refused_with_the_fix(output_dir, tmp_path):
    loaded(tiny_config(output_dir)).save_adapter(tmp_path / "adapter")
    other = loaded(tiny_config(output_dir, lora={**LORA, "rank": 8}))
    with pytest.raises(ModelError, match="adapter has rank 4 .* set model.lora to match the adapter"):
        other.load_adapter(tmp_path / "adapter")


def test_free_drops_the_model(output_dir):
    manager = Session.open(tiny_config(output_dir)).manager
    model, _tokenizer = manager.load()
    reference = weakref.ref(model)
    del model, _tokenizer
    manager.free()
    assert reference() is None
    assert manager.model is None and manager.tokenizer is None


@pytest.mark.parametrize("lora", [None, {"enabled": False}])
def test_full_fine_tuning_trains_everything_and_saves_the_whole_model(output_dir, tmp_path, lora):
    manager = loaded(tiny_config(output_dir, lora=lora))
    trainable, total = manager.parameter_counts()
    assert trainable == total and not manager.uses_lora
    perturb(manager.model)
    expected = logits(manager)
    manager.save_adapter(tmp_path / "model")
    assert (tmp_path / "model" / "config.json").is_file()

    resumed = loaded(tiny_config(output_dir, lora=lora))
    resumed.load_adapter(tmp_path / "model")
    assert torch.equal(logits(resumed), expected)
    inference = Session.for_inference(tiny_config(output_dir, lora=lora), tmp_path / "model").manager
    assert torch.equal(logits(inference), expected)


def test_trained_embeddings_stay_tied_to_the_output_layer(output_dir):
    manager = loaded(tiny_config(output_dir, lora={**LORA, "modules_to_save": ["embed_tokens"]}))
    perturb(manager.model)
    base = manager.model.get_base_model()
    embedding = base.get_input_embeddings().modules_to_save["default"].weight
    assert embedding.requires_grad
    assert base.get_output_embeddings().modules_to_save["default"].weight is embedding


@pytest.mark.parametrize(
    "lora", [LORA, {**LORA, "modules_to_save": ["embed_tokens"]}], ids=["lora", "lora+embed"]
)
def test_merged_export_loads_with_plain_transformers_and_generates_the_same(output_dir, tmp_path, lora):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    manager = loaded(tiny_config(output_dir, lora=lora))
    perturb(manager.model, seed=3)
    manager.merge_and_save(tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").to(manager.model.device).eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "merged")
    assert not any("lora" in name for name, _ in merged.named_parameters())

    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    ).to(manager.model.device)
    settings = {"max_new_tokens": 6, "do_sample": False}
    with torch.no_grad():
        expected = manager.model.eval().generate(**prompt, **settings)
        assert torch.equal(merged.generate(**prompt, **settings), expected)
    assert torch.allclose(merged(**prompt).logits, manager.model(**prompt).logits, atol=1e-4)
