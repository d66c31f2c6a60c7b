"""The model's own chat template, kept (``prompt.template_source``): its role headers and special tokens, with
our system prompt and the ``reasoning_start`` prefill carried in.

Why: an instruct model was trained on its own turn markers (Llama-3's ``<|start_header_id|>``, Gemma's
``<start_of_turn>``, Mistral's ``[INST]``); our template would replace them with ChatML headers the model may not
have, or a plain layout. The model's template is wrapped, not edited: a preamble puts the configured system
prompt first when a conversation has none and the opening tag before each assistant message (the data layer
stores them without it), and the generation prompt ends with the tag, so generation starts inside the working
exactly as with our template and the rewards, data and evaluation code see the same completions.

It is kept only where that is safe, checked on the tokenizer when the model loads:
- it renders our conversations (some templates refuse a system turn);
- the system prompt survives (some templates drop it);
- prompt + generation prompt is a prefix of the whole conversation (TRL's prompt/completion SFT needs it);
- the assistant's turn ends with a token generation can stop at: the tokenizer's eos, or a special token that
  then becomes the eos (Gemma's ``<end_of_turn>``; Unsloth maps it the same way).
Under ``auto`` a template that fails a check, or one that is ChatML already (ours writes the same headers), gives
way to ours, and the reason is logged and recorded in ``summary.json``; under ``model`` it is an error.

    >>> from llm_finetuning.config import PromptConfig
    >>> "{%- set messages = ns.items -%}" in wrap_model_template("{{ messages }}", PromptConfig())
    True
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import jinja2

from ..config import PromptConfig
from ..errors import ModelError
from .template import apply_chat_template_to, check_tags_written

__all__ = ["TemplateChoice", "added_token_opening", "choose_template", "keep_model_template", "wrap_model_template"]

logger = logging.getLogger(__name__)

_PROBE_QUESTION = "What is 1 + 1?"
_PROBE_ANSWER = "1 + 1 = 2 PROBE-END"


@dataclass(frozen=True)
class TemplateChoice:
    """Whose chat template the tokenizer got (``model`` or ``ours``) and why; recorded in ``summary.json``."""

    source: str
    reason: str

    def record(self) -> dict[str, str]:
        return {"source": self.source, "reason": self.reason}


def wrap_model_template(template: str, prompt: PromptConfig, prefill: bool = True) -> str:
    """``template`` with a preamble that supplies the system prompt and the opening tag, and (``prefill``) the
    tag after the generation prompt. Top-level ``set`` shadows the caller's ``messages`` for the whole template."""
    system, opening = json.dumps(prompt.system_prompt), json.dumps(prompt.reasoning_start)
    preamble = (
        "{%- set ns = namespace(items=[]) -%}\n"
        "{%- if not messages or messages[0]['role'] != 'system' -%}"
        f"{{%- set ns.items = [{{'role': 'system', 'content': {system}}}] -%}}{{%- endif -%}}\n"
        "{%- for message in messages -%}"
        f"{{%- if message['role'] == 'assistant' and not message['content'].startswith({opening}) -%}}"
        f"{{%- set ns.items = ns.items + [{{'role': 'assistant', 'content': {opening} + message['content']}}] -%}}"
        "{%- else -%}{%- set ns.items = ns.items + [message] -%}{%- endif -%}"
        "{%- endfor -%}\n"
        "{%- set messages = ns.items -%}\n"
    )
    suffix = f"\n{{%- if add_generation_prompt -%}}{{{{- {opening} -}}}}{{%- endif -%}}" if prefill else ""
    return preamble + template.strip() + suffix


def choose_template(tokenizer: Any, prompt: PromptConfig) -> TemplateChoice:
    """Set the tokenizer's chat template as ``prompt.template_source`` says (see the module docstring), with a pad
    token and left padding; the choice and its reason."""
    if prompt.template_source == "ours":
        apply_chat_template_to(tokenizer, prompt)
        return TemplateChoice("ours", "prompt.template_source: ours")
    check_tags_written(tokenizer, prompt)
    kept = keep_model_template(tokenizer, prompt)
    if isinstance(kept, TemplateChoice):
        _pad_left(tokenizer)
        return kept
    if prompt.template_source == "model":
        raise ModelError(f"prompt.template_source: model, but the model's chat template {kept}; set "
                         "prompt.template_source: ours (our ChatML or plain layout)")  # fmt: skip
    apply_chat_template_to(tokenizer, prompt)
    return TemplateChoice("ours", f"the model's chat template {kept}")


def _pad_left(tokenizer: Any) -> None:
    # As apply_chat_template_to: eos as padding is safe (TRL masks padding by attention mask).
    tokenizer.pad_token = tokenizer.pad_token or getattr(tokenizer, "unk_token", None) or tokenizer.eos_token
    tokenizer.padding_side = "left"


def keep_model_template(tokenizer: Any, prompt: PromptConfig) -> TemplateChoice | str:
    """Give ``tokenizer`` its own template, wrapped, when every check passes (the turn-end token becoming its eos
    where it is another special token); else the problem, as a phrase, and the tokenizer untouched."""
    own = tokenizer.chat_template
    if not isinstance(own, str) or not own.strip():
        return "is missing"
    probe = _conversation(prompt, with_answer=False)
    try:
        already = _render(tokenizer, own, probe, generation=True).endswith(prompt.reasoning_start)
        wrapped = wrap_model_template(own, prompt, prefill=not already)
        asked = _render(tokenizer, wrapped, probe, generation=True)
        whole = _render(tokenizer, wrapped, _conversation(prompt, with_answer=True), generation=False)
    except (jinja2.TemplateError, ValueError, TypeError, KeyError) as exc:
        return f"does not render our conversations ({_first_line(exc)})"
    if "<|im_start|>assistant" in asked:
        return "is ChatML, which ours writes too"
    if prompt.system_prompt not in asked:
        return "drops the system prompt, which carries the answer format"
    if not whole.startswith(asked):
        return "renders the prompt differently alone and before an answer (TRL's SFT needs one to prefix the other)"
    turn_end = _turn_end(tokenizer, whole, prompt.solution_end)
    if turn_end is None:
        return "ends the assistant's turn with text, not a token generation can stop at"
    tokenizer.chat_template = wrapped
    if turn_end != tokenizer.eos_token:
        logger.info("the model's template ends a turn with %s: it becomes the eos (was %s)", turn_end,
                    tokenizer.eos_token)  # fmt: skip
        tokenizer.eos_token = turn_end
    return TemplateChoice("model", "the model's own chat template, with our system prompt and prefill")


def _conversation(prompt: PromptConfig, with_answer: bool) -> list[dict[str, str]]:
    turns = [{"role": "system", "content": prompt.system_prompt}, {"role": "user", "content": _PROBE_QUESTION}]
    answer = f"{_PROBE_ANSWER}{prompt.reasoning_end}{prompt.solution_start}2{prompt.solution_end}"
    return [*turns, {"role": "assistant", "content": answer}] if with_answer else turns


def _render(tokenizer: Any, template: str, conversation: list[dict[str, str]], generation: bool) -> str:
    return tokenizer.apply_chat_template(conversation, chat_template=template, tokenize=False,
                                         add_generation_prompt=generation)  # fmt: skip


def _turn_end(tokenizer: Any, whole: str, solution_end: str) -> str | None:
    """The special token right after the answer (the eos, or one that can become it); None when text follows."""
    token = added_token_opening(tokenizer, whole.rsplit(solution_end, 1)[-1].lstrip(" "))
    return token if token in tokenizer.all_special_tokens else None


def added_token_opening(tokenizer: Any, text: str) -> str | None:
    """The longest token added to the vocabulary (special tokens, turn markers) that ``text`` starts with."""
    for token in sorted(tokenizer.get_added_vocab(), key=len, reverse=True):
        if text.startswith(token):
            return token
    return None


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
