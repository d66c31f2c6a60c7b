"""The model's own chat template, kept (prompt.template_source): non-ChatML layouts built on the tiny tokenizer,
the checks that decide when it is safe, and a run through SFT, GRPO, save and infer with a Llama-3-style one."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from conftest import SIMPLE_SUMS
from transformers import AutoTokenizer

from llm_finetuning.config import PromptConfig
from llm_finetuning.errors import ModelError
from llm_finetuning.model.own_template import choose_template

PROMPT = PromptConfig()
QUESTION = [{"role": "system", "content": PROMPT.system_prompt}, {"role": "user", "content": "What is 2 + 3?"}]
ANSWER = [{"role": "assistant", "content": "2 + 3 = 5<end_working_out><SOLUTION>5</SOLUTION>"}]

# Llama-3's layout: role headers, the turn ended by the tokenizer's eos (Llama-3-Instruct's eos is <|eot_id|>).
LLAMA3 = (
    "{%- for message in messages -%}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + eos_token -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}"
)
# Gemma's layout: no system role (folded into the first user turn), turns ended by <end_of_turn>, not the eos.
GEMMA = (
    "{%- set first = messages[0]['content'] + '\\n\\n' if messages[0]['role'] == 'system' else '' -%}"
    "{%- for message in messages if message['role'] != 'system' -%}"
    "{{- '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\\n' -}}"
    "{{- (first if loop.first else '') + message['content'] | trim + '<end_of_turn>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}"
)


@pytest.fixture
def tokenizer(tiny_base):
    return AutoTokenizer.from_pretrained(tiny_base)


def test_a_llama3_layout_is_kept_with_our_system_prompt_and_prefill(tokenizer):
    tokenizer.chat_template = LLAMA3
    choice = choose_template(tokenizer, PROMPT)
    assert choice.source == "model"
    asked = tokenizer.apply_chat_template(QUESTION[1:], tokenize=False, add_generation_prompt=True)
    assert asked == (f"<|start_header_id|>system<|end_header_id|>\n\n{PROMPT.system_prompt}<|im_end|>"
                     "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2 + 3?<|im_end|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n<start_working_out>")  # fmt: skip
    whole = tokenizer.apply_chat_template(QUESTION + ANSWER, tokenize=False)
    assert whole == asked + ANSWER[0]["content"] + "<|im_end|>"  # TRL's prompt/completion SFT prefix property
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None


def test_a_special_turn_end_that_is_not_the_eos_becomes_the_eos(tokenizer):
    tokenizer.add_special_tokens({"additional_special_tokens": ["<end_of_turn>"]})
    tokenizer.chat_template = GEMMA
    assert choose_template(tokenizer, PROMPT).source == "model"
    assert tokenizer.eos_token == "<end_of_turn>"  # generation stops where the model's turns end
    asked = tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    assert asked.startswith(f"<start_of_turn>user\n{PROMPT.system_prompt}\n\nWhat is 2 + 3?<end_of_turn>\n")
    assert asked.endswith("<start_of_turn>model\n<start_working_out>")


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{{- raise_exception('System role not supported') if messages[0]['role'] == 'system' -}}", "does not render"),
        ("{%- for m in messages if m['role'] != 'system' -%}{{- m['content'] + eos_token -}}{%- endfor -%}",
         "drops the system prompt"),
        ("{%- for m in messages -%}{{- m['content'] + '\\n### END\\n' -}}{%- endfor -%}", "ends the assistant's turn"),
        (("{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>' -}}"
         "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"), "is ChatML"),
        (None, "is missing"),
    ],
)
def test_a_template_that_is_not_safe_gives_way_to_ours_under_auto_and_is_an_error_under_model(
    tokenizer, tiny_base, template, problem
):
    tokenizer.chat_template = template
    choice = choose_template(tokenizer, PROMPT)
    assert choice.source == "ours" and problem in choice.reason
    assert tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True).startswith(
        f"<|im_start|>system\n{PROMPT.system_prompt}<|im_end|>"
    )
    fresh = AutoTokenizer.from_pretrained(tiny_base)
    fresh.chat_template = template
    with pytest.raises(ModelError, match=f"template_source: model, but the model's chat template {problem}"):
        choose_template(fresh, replace(PROMPT, template_source="model"))


def test_ours_replaces_even_a_safe_template_when_asked(tokenizer):
    tokenizer.chat_template = LLAMA3
    assert choose_template(tokenizer, replace(PROMPT, template_source="ours")).source == "ours"
    assert "<|start_header_id|>" not in tokenizer.chat_template


@pytest.mark.slow
def test_a_llama3_model_trains_saves_and_answers_in_its_own_layout(tiny_config, tmp_path):
    from llm_finetuning.model.tiny import build_tiny_for_run
    from llm_finetuning.pipeline import RunOptions, run
    from llm_finetuning.tools import infer

    base = tmp_path / "llama3_base"  # the demo's tiny model, its tokenizer given a Llama-3-style template
    shutil.copytree(build_tiny_for_run(tiny_config(*SIMPLE_SUMS, output_dir=tmp_path / "build")), base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.chat_template = LLAMA3
    tokenizer.save_pretrained(base)
    config = tiny_config(*SIMPLE_SUMS, f"model.model_name={base}", "sft_training.max_steps=60",
                         "grpo_training.max_steps=1", "grpo_training.per_device_train_batch_size=8",
                         "grpo_training.num_generations=4", "grpo_training.max_completion_length=16",
                         "evaluation.num_samples=8", "evaluation.sampled_k=1", "data.synthetic.num_eval=8",
                         output_dir=tmp_path / "run")  # fmt: skip
    summary = run(config, RunOptions())
    assert summary["chat_template"]["source"] == "model"
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["chat_template"] == summary["chat_template"]
    losses = [json.loads(line).get("loss") for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    sft_losses = [loss for loss in losses if loss is not None]
    assert sft_losses[-1] < 0.8 * sft_losses[0]  # SFT learned from conversations in the model's layout
    saved = tmp_path / "run" / "grpo_saved_lora"
    assert "<|start_header_id|>" in AutoTokenizer.from_pretrained(saved).chat_template
    trained = infer.load_trained(config, saved)
    try:
        asked = trained.loaded.manager.tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
        assert asked.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n<start_working_out>")
        ((_, _, completion),) = trained.solve_many(["What is 2 + 3?"])
        assert completion and "<|start_header_id|>" not in completion  # generation started inside the answer
    finally:
        trained.free()
