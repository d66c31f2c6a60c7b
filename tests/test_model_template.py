"""The chat template: exact renderings, the prompt/completion prefix property TRL relies on, and its round trip."""

from __future__ import annotations

import pytest

from llm_finetuning.config import PromptConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model import render_chat_template
from llm_finetuning.model.template import apply_chat_template_to

SYSTEM = PromptConfig().system_prompt
HEAD = f"<|im_start|>system\n{SYSTEM}<|im_end|>"
PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]
COMPLETION = [{"role": "assistant", "content": "2 + 3 = 5<end_working_out><SOLUTION>5</SOLUTION>"}]


@pytest.fixture
def tokenizer(tiny_tokenizer):
    return tiny_tokenizer


@pytest.mark.parametrize(
    ("messages", "generation_prompt", "expected"),
    [
        (
            PROMPT,
            True,
            HEAD + "<|im_start|>user\nWhat is 2 + 3?<|im_end|><|im_start|>assistant\n<start_working_out>",
        ),
        (PROMPT, False, HEAD + "<|im_start|>user\nWhat is 2 + 3?<|im_end|>"),
        (
            [{"role": "system", "content": "Be brief."}, *PROMPT, *COMPLETION],
            False,
            (
                "<|im_start|>system\nBe brief.<|im_end|><|im_start|>user\nWhat is 2 + 3?<|im_end|>"
                "<|im_start|>assistant\n<start_working_out>2 + 3 = 5<end_working_out><SOLUTION>5</SOLUTION><|im_end|>"
            ),
        ),
        (  # an assistant message that already carries the opening tag does not get a second one
            [
                *PROMPT,
                {
                    "role": "assistant",
                    "content": "<start_working_out>5<end_working_out><SOLUTION>5</SOLUTION>",
                },
            ],
            False,
            HEAD + "<|im_start|>user\nWhat is 2 + 3?<|im_end|>"
            "<|im_start|>assistant\n<start_working_out>5<end_working_out><SOLUTION>5</SOLUTION><|im_end|>",
        ),
    ],
)
def test_template_renders_roles_default_system_prompt_and_reasoning_prefill(
    tokenizer, messages, generation_prompt, expected
):
    rendered = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt
    )
    assert rendered == expected


def test_prompt_with_generation_prompt_is_a_prefix_of_the_full_conversation(tokenizer):
    prompt = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(PROMPT + COMPLETION, tokenize=False)
    assert full == prompt + COMPLETION[0]["content"] + tokenizer.eos_token
    prompt_ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]
    full_ids = tokenizer.apply_chat_template(PROMPT + COMPLETION, return_dict=True)["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids
    assert full_ids[-1] == tokenizer.eos_token_id


def test_template_round_trips_through_save_pretrained(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "chat_template.jinja").read_text().startswith("{%- set system_prompt")
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    for add in (True, False):
        expected = tokenizer.apply_chat_template(
            PROMPT + COMPLETION, tokenize=False, add_generation_prompt=add
        )
        assert (
            reloaded.apply_chat_template(PROMPT + COMPLETION, tokenize=False, add_generation_prompt=add)
            == expected
        )


def test_tags_are_single_tokens_that_survive_skip_special_tokens(tokenizer):
    prompt = PromptConfig()
    for tag in (prompt.reasoning_start, prompt.reasoning_end, prompt.solution_start, prompt.solution_end):
        assert len(tokenizer(tag, add_special_tokens=False)["input_ids"]) == 1, tag
    text = "<start_working_out>2 + 3 = 5<end_working_out><SOLUTION>5</SOLUTION>"
    ids = tokenizer(text + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_values_with_quotes_braces_and_newlines_are_baked_in_verbatim(tokenizer):
    nasty = PromptConfig(system_prompt="Say \"hi\" {{ x }} {% if %}\n\\n 'q' é", reasoning_start="<r'>")
    tokenizer.chat_template = render_chat_template(nasty, tokenizer.eos_token, chatml=True)
    try:
        rendered = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    finally:
        apply_chat_template_to(tokenizer, PromptConfig())  # the tokenizer is shared by the session
    assert rendered.startswith(f"<|im_start|>system\n{nasty.system_prompt}<|im_end|>")
    assert rendered.endswith("<|im_start|>assistant\n<r'>")


def test_unknown_role_is_refused(tokenizer):
    with pytest.raises(Exception, match="unsupported role tool"):
        tokenizer.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_missing_template_file_is_a_model_error_naming_it():
    with pytest.raises(ModelError, match="nowhere.jinja not found"):
        render_chat_template(PromptConfig(chat_template="nowhere.jinja"), "<|im_end|>", chatml=True)


def _fast_tokenizer(model, pre_tokenizer, decoder, eos: str, corpus: list[str]):
    """A small trained tokenizer of another family: no ChatML tokens, ``eos`` as its only special token."""
    from tokenizers import Tokenizer, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(model)
    raw.pre_tokenizer, raw.decoder = pre_tokenizer, decoder
    trainer_class = trainers.BpeTrainer if type(model).__name__ == "BPE" else trainers.WordLevelTrainer
    raw.train_from_iterator(corpus, trainer_class(special_tokens=[eos, "[UNK]"]))
    return PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=eos, unk_token="[UNK]")


@pytest.fixture(scope="module")
def plain_tokenizer():
    """Byte-level BPE without ChatML tokens (as a base model's tokenizer often is), eos ``</s>``."""
    from tokenizers import decoders, models, pre_tokenizers

    corpus = ["What is 2 + 3? 2 + 3 = 5", SYSTEM, "<start_working_out> <SOLUTION>"] * 20
    return apply_chat_template_to(_fast_tokenizer(models.BPE(), pre_tokenizers.ByteLevel(add_prefix_space=False),
                                                  decoders.ByteLevel(), "</s>", corpus), PromptConfig())  # fmt: skip


def test_a_tokenizer_without_chatml_tokens_gets_the_plain_layout_and_keeps_the_prefix_property(plain_tokenizer):
    prompt = plain_tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    assert prompt == f"{SYSTEM}</s>What is 2 + 3?\n<start_working_out>"  # no <|im_start|> written as text
    full = plain_tokenizer.apply_chat_template(PROMPT + COMPLETION, tokenize=False)
    assert full == prompt + COMPLETION[0]["content"] + "</s>"
    prompt_ids = plain_tokenizer(prompt, add_special_tokens=False)["input_ids"]
    full_ids = plain_tokenizer(full, add_special_tokens=False)["input_ids"]
    assert full_ids[: len(prompt_ids)] == prompt_ids and full_ids[-1] == plain_tokenizer.eos_token_id


def test_tags_written_in_pieces_survive_decoding_with_special_tokens_skipped(plain_tokenizer):
    tag = PromptConfig().reasoning_start
    assert len(plain_tokenizer(tag, add_special_tokens=False)["input_ids"]) > 1  # ordinary text, no new token
    text = COMPLETION[0]["content"]
    ids = plain_tokenizer(text + "</s>", add_special_tokens=False)["input_ids"]
    assert plain_tokenizer.decode(ids, skip_special_tokens=True) == text


def test_a_tag_the_tokenizer_cannot_write_is_refused_naming_the_tag():
    from tokenizers import decoders, models, pre_tokenizers

    words = _fast_tokenizer(models.WordLevel(unk_token="[UNK]"), pre_tokenizers.Whitespace(),
                            decoders.WordPiece(), "</s>", ["what is two plus three"])  # fmt: skip
    with pytest.raises(ModelError) as info:
        apply_chat_template_to(words, PromptConfig())
    assert str(info.value).startswith("prompt.reasoning_start: this tokenizer writes '<start_working_out>' back as")
