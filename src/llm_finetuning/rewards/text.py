"""Completion helpers the rewards share: the text of a completion, end-of-sequence markers, gold answers.

Everything here is linear in the text's length (``str.find``/``str.endswith``), so the format rewards
built on it stay linear too.
"""

from __future__ import annotations

from typing import Any

# End-of-sequence markers that may survive decoding as text after the final tag.
DEFAULT_EOS_TEXTS = ("<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "</s>", "<eos>")


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, or the contents of a list of chat messages.

    >>> completion_text([{"role": "assistant", "content": "4"}])
    '4'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "4"}]}])
    '4'
    """
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        return "".join(m if isinstance(m, str) else completion_text(m) for m in completion)
    return str(completion)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):  # multimodal parts: keep the text ones
        return "".join(
            p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def only_whitespace_or_eos(text: str, eos_texts: tuple[str, ...]) -> bool:
    """True when ``text`` holds nothing but whitespace and end-of-sequence markers.

    >>> only_whitespace_or_eos(" <|im_end|>\\n", DEFAULT_EOS_TEXTS), only_whitespace_or_eos("x", ())
    (True, False)
    """
    if not text.strip():
        return True
    for eos in eos_texts:
        if eos:
            text = text.replace(eos, "")
    return not text.strip()


def strip_trailing_eos(text: str, eos_texts: tuple[str, ...]) -> str:
    """``text`` without trailing whitespace and end-of-sequence markers (in any order).

    >>> strip_trailing_eos("done</s> <|im_end|>", DEFAULT_EOS_TEXTS)
    'done'
    """
    text = text.rstrip()
    changed = True
    while changed and text:
        changed = False
        for eos in eos_texts:
            if eos and text.endswith(eos):
                text = text[: -len(eos)].rstrip()
                changed = True
    return text


def gold_text(gold: Any) -> str:
    """The gold answer as text (the first one when a list of acceptable answers is given).

    >>> gold_text(["4", "four"]), gold_text(4)
    ('4', '4')
    """
    if isinstance(gold, (list, tuple)):
        return gold_text(gold[0]) if gold else ""
    return gold if isinstance(gold, str) else str(gold)


def gold_candidates(gold: Any) -> list[str]:
    """Every acceptable gold answer as text."""
    if isinstance(gold, (list, tuple)):
        return [gold_text(g) for g in gold if g is not None]
    return [gold_text(gold)]
