"""The chat template: rendered from ``templates/chat_template.jinja`` with the tags baked in, set on tokenizers.

Why a two-layer template: the tags and the system prompt live in ``PromptConfig`` (the rewards read the
same config), so the template file holds placeholders and we render it once with jinja2 into the string a
tokenizer stores. The placeholders use ``[[ ]]`` delimiters so the Hugging Face template's own ``{{ }}`` and
``{% %}`` pass through untouched; values go in as Jinja string literals, so quotes, backslashes or braces
in a system prompt cannot break the template.

Any tokenizer: a tokenizer with ``<|im_start|>`` as one token (Qwen, SmolLM2, the tiny demo model) gets
ChatML turn headers, any other the plain layout of Unsloth's recipe (the system prompt and eos, then the
question); both end a turn with the tokenizer's eos. The tags stay ordinary text: a pretrained byte-level
tokenizer writes them from pieces it already has, while a new token would start from an untrained embedding
that LoRA never trains (only ``modules_to_save`` would, at the cost of the whole embedding in every adapter).
TRL decodes completions with special tokens skipped, so text tags also survive decoding. A tag the tokenizer
cannot write back (no byte fallback) is refused with the tag to change.

    >>> from llm_finetuning.config import PromptConfig
    >>> template = render_chat_template(PromptConfig(), eos_token="<|im_end|>", chatml=True)
    >>> "<start_working_out>" in template
    True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from ..config import PromptConfig
from ..config.resources import packaged
from ..errors import ModelError

__all__ = ["apply_chat_template_to", "check_tags_written", "render_chat_template", "resolve_template_path"]


def _jinja_string(value: str) -> str:
    # A JSON string is a valid Jinja string literal: Jinja unescapes \", \\, \n and \uXXXX the same way.
    return json.dumps(value, ensure_ascii=False)


_SOURCE_ENV = jinja2.Environment(
    variable_start_string="[[",
    variable_end_string="]]",
    block_start_string="[%",
    block_end_string="%]",
    comment_start_string="[#",
    comment_end_string="#]",
    keep_trailing_newline=False,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)
_SOURCE_ENV.filters["jinja_string"] = _jinja_string
_SOURCE_ENV.filters["jinja_bool"] = lambda value: "true" if value else "false"
CHATML_TURN = "<|im_start|>"


def resolve_template_path(template: str | Path) -> Path:
    """Find the template file: absolute, else relative to the working directory, else one the package ships
    (``templates/chat_template.jinja``, installed or in the repository)."""
    path = Path(template)
    shipped = None if path.is_absolute() else packaged(path)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, *([shipped] if shipped else [])]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ModelError(
        f"prompt.chat_template: {template} not found (looked in {', '.join(str(c) for c in candidates)}); "
        "point it at a .jinja file or restore templates/chat_template.jinja"
    )


def render_chat_template(prompt: PromptConfig, eos_token: str, chatml: bool) -> str:
    """Return the tokenizer-ready chat template with the tags, system prompt and ``eos_token`` as literals;
    ``chatml``: ChatML turn headers (else the plain layout)."""
    if not eos_token:
        raise ModelError("the tokenizer has no eos token; use a model whose tokenizer defines one")
    path = resolve_template_path(prompt.chat_template)
    try:
        source = _SOURCE_ENV.from_string(path.read_text(encoding="utf-8"))
        rendered = source.render(
            system_prompt=prompt.system_prompt,
            reasoning_start=prompt.reasoning_start,
            reasoning_end=prompt.reasoning_end,
            solution_start=prompt.solution_start,
            solution_end=prompt.solution_end,
            eos_token=eos_token,
            chatml=chatml,
        )
        jinja2.Environment().parse(rendered)  # fail here, not at the first apply_chat_template call
    except jinja2.TemplateError as exc:
        raise ModelError(f"prompt.chat_template: {path} does not render ({exc}); fix the template") from None
    return rendered.strip() + "\n"


def apply_chat_template_to(tokenizer: Any, prompt: PromptConfig) -> Any:
    """Give ``tokenizer`` our chat template, a pad token and left padding (for batched generation)."""
    check_tags_written(tokenizer, prompt)
    chatml = CHATML_TURN in tokenizer.get_vocab()
    tokenizer.chat_template = render_chat_template(prompt, tokenizer.eos_token, chatml)
    if tokenizer.pad_token is None:
        # Reusing eos is safe: TRL masks padding by attention mask, and eos ends every assistant turn.
        tokenizer.pad_token = getattr(tokenizer, "unk_token", None) or tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def check_tags_written(tokenizer: Any, prompt: PromptConfig) -> None:
    """Refuse a tag the tokenizer cannot write back (encoded, then decoded without special tokens); a space a
    tokenizer puts before a text it encodes alone is not a change of the tag."""
    for field in ("reasoning_start", "reasoning_end", "solution_start", "solution_end"):
        tag = getattr(prompt, field)
        ids = tokenizer(tag, add_special_tokens=False)["input_ids"]
        written = tokenizer.decode(ids, skip_special_tokens=True)
        if written.strip() != tag:
            raise ModelError(
                f"prompt.{field}: this tokenizer writes {tag!r} back as {written!r}; choose a tag made of "
                "characters it has (letters, digits, < > / _ are in every byte-level tokenizer)"
            )
