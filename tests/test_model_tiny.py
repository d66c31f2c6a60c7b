"""The offline tiny base model: deterministic from its seed, cached atomically, loadable like a Hub model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llm_finetuning.config import PromptConfig, TinyModelSettings
from llm_finetuning.model import build_tiny_base, tiny

TINY = TinyModelSettings(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64
)
CORPUS = [f"What is {a} + {b}? {a} + {b} = {a + b}" for a in range(10) for b in range(10)]


def _load(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_same_seed_builds_identical_weights_and_tokenizer(tmp_path):
    first = build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path / "a", max_seq_length=128)
    second = build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path / "b", max_seq_length=128)
    assert first != second
    assert (first / "tokenizer.json").read_bytes() == (second / "tokenizer.json").read_bytes()
    (model_a, _), (model_b, _) = _load(first), _load(second)
    state_a, state_b = model_a.state_dict(), model_b.state_dict()
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[key], state_b[key]) for key in state_a)

    other_seed = build_tiny_base(
        dataclasses.replace(TINY, seed=1), PromptConfig(), CORPUS, tmp_path / "a", 128
    )
    model_c, _ = _load(other_seed)
    assert not torch.equal(
        model_c.state_dict()["model.embed_tokens.weight"], state_a["model.embed_tokens.weight"]
    )


def test_reloads_with_auto_classes_as_a_small_tied_qwen3(tmp_path):
    path = build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path, max_seq_length=128)
    assert path.parent == tmp_path.resolve() / ".tiny_base"
    model, tokenizer = _load(path)
    assert model.config.model_type == "qwen3"
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tokenizer)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert tokenizer.tokenize("123") == ["1", "2", "3"]  # one token per digit
    output = model.generate(**tokenizer("What is", return_tensors="pt"), max_new_tokens=3, do_sample=False)
    assert output.shape[1] > 2


def test_second_build_reuses_the_cache(tmp_path, monkeypatch):
    path = build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path, max_seq_length=128)
    monkeypatch.setattr(tiny, "_build_into", lambda *args: pytest.fail("rebuilt a cached model"))
    assert build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path, max_seq_length=128) == path


def test_changing_corpus_or_tags_changes_the_cache_key(tmp_path):
    base = tiny.tiny_cache_dir(TINY, PromptConfig(), CORPUS, tmp_path, 128)
    assert tiny.tiny_cache_dir(TINY, PromptConfig(), CORPUS[:-1], tmp_path, 128) != base
    assert tiny.tiny_cache_dir(TINY, PromptConfig(solution_start="<ANS>"), CORPUS, tmp_path, 128) != base


def test_a_build_that_crashes_leaves_no_cache_behind(tmp_path, monkeypatch):
    def crash(*args):
        raise RuntimeError("simulated crash while initialising weights")

    monkeypatch.setattr(tiny, "_init_model", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path, max_seq_length=128)
    assert list((tmp_path / ".tiny_base").iterdir()) == []
    monkeypatch.undo()
    path = build_tiny_base(TINY, PromptConfig(), CORPUS, tmp_path, max_seq_length=128)
    assert (path / "tiny_manifest.json").is_file()
