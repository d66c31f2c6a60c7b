"""The GSM8K XML rewards (willccbb's GRPO gist) for
``<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>\\n``.

Deliberate fixes to the gist, each noted where it applies: its format regexes lack ``re.DOTALL`` and
so never match multi-line reasoning; without an ``<answer>`` tag it graded the whole completion as
the answer; its trailing-text penalty was unbounded. Tag names (``reasoning_tag``, ``answer_tag``)
are parameters; they are not the prompt config's tags, which belong to the notebook format.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .base import Reward
from .text import DEFAULT_EOS_TEXTS, gold_candidates, strip_trailing_eos


def xml_answer(text: str, answer_tag: str = "answer") -> str | None:
    """The stripped text after the last ``<answer>`` up to the next ``</answer>``; ``None`` without one.

    >>> xml_answer("<reasoning>\\n2+2\\n</reasoning>\\n<answer>\\n4\\n</answer>\\n")
    '4'
    """
    opening, closing = f"<{answer_tag}>", f"</{answer_tag}>"
    at = text.rfind(opening)
    if at < 0:
        return None
    rest = text[at + len(opening) :]
    end = rest.find(closing)
    return (rest if end < 0 else rest[:end]).strip()


@dataclasses.dataclass
class _XmlReward(Reward):
    reasoning_tag: str = "reasoning"
    answer_tag: str = "answer"

    def validate(self) -> None:
        for tag in ("reasoning_tag", "answer_tag"):
            value = getattr(self, tag)
            self.require(
                bool(value) and "<" not in value and ">" not in value, tag, "must be a bare tag name"
            )


@dataclasses.dataclass
class Correctness(_XmlReward):
    """``score`` when the ``<answer>`` content equals the gold answer as a string, else 0 (the gist:
    2.0; some copies of it use 1.0: set ``score: 1.0``). Range 0 … +2.0.

    >>> Correctness()(completions=["<answer>\\n72\\n</answer>", "<answer>70</answer>", "72"],
    ...               answer=["72", "72", "72"])
    [2.0, 0.0, 0.0]
    """

    name = "correctness"
    needs_answer = True

    score: float = 2.0

    def score_completion(self, text: str, gold: Any) -> float:
        answer = xml_answer(text, self.answer_tag)
        right = answer is not None and any(answer == g.strip() for g in gold_candidates(gold))
        return self.score if right else 0.0

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)


@dataclasses.dataclass
class IntAnswer(_XmlReward):
    """``score`` when the ``<answer>`` content is an integer (ASCII digits, optional leading minus;
    the gist's ``str.isdigit`` also took ``²`` and refused ``-3``), else 0. Range 0 … +0.5.

    >>> IntAnswer()(completions=["<answer>\\n-12\\n</answer>", "<answer>1.5</answer>", "12"])
    [0.5, 0.0, 0.0]
    """

    name = "int"

    score: float = 0.5

    def score_completion(self, text: str, gold: Any) -> float:
        answer = xml_answer(text, self.answer_tag)
        digits = answer[1:] if answer and answer.startswith("-") else answer
        return self.score if digits and digits.isascii() and digits.isdigit() else 0.0

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)


@dataclasses.dataclass
class StrictFormat(_XmlReward):
    """``score`` for exactly ``<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>`` from the
    first character, followed only by whitespace or end-of-sequence markers; else 0. Range 0 … +0.5.

    >>> StrictFormat()(completions=["<reasoning>\\nA\\nB\\n</reasoning>\\n<answer>\\n4\\n</answer>\\n",
    ...                             "<reasoning>A</reasoning><answer>4</answer>"])
    [0.5, 0.0]
    """

    name = "strict_format"

    score: float = 0.5
    eos_texts: tuple[str, ...] = DEFAULT_EOS_TEXTS

    def score_completion(self, text: str, gold: Any) -> float:
        r, a = self.reasoning_tag, self.answer_tag
        opening, middle, closing = f"<{r}>\n", f"\n</{r}>\n<{a}>\n", f"\n</{a}>"
        if not text.startswith(opening):
            return 0.0
        at = text.find(middle, len(opening))
        if at < 0:
            return 0.0
        rest = strip_trailing_eos(text[at + len(middle) :], self.eos_texts)
        return self.score if rest.endswith(closing) else 0.0

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)


@dataclasses.dataclass
class SoftFormat(_XmlReward):
    """``score`` for ``<reasoning>…</reasoning>``, whitespace, then ``<answer>…</answer>`` at the start
    of the completion (anything may follow), else 0. Range 0 … +0.5.

    >>> SoftFormat()(completions=["<reasoning>A\\nB</reasoning> <answer>4</answer> bye", "<answer>4</answer>"])
    [0.5, 0.0]
    """

    name = "soft_format"

    score: float = 0.5

    def score_completion(self, text: str, gold: Any) -> float:
        r, a = self.reasoning_tag, self.answer_tag
        text = text.lstrip()
        if not text.startswith(f"<{r}>"):
            return 0.0
        end = text.find(f"</{r}>", len(r) + 2)
        if end < 0:
            return 0.0
        rest = text[end + len(r) + 3 :].lstrip()
        right = rest.startswith(f"<{a}>") and rest.find(f"</{a}>", len(a) + 2) >= 0
        return self.score if right else 0.0

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)


@dataclasses.dataclass
class XmlCount(_XmlReward):
    """``per_tag`` for each of ``<reasoning>\\n``, ``\\n</reasoning>\\n``, ``\\n<answer>\\n`` and
    ``\\n</answer>`` that appears exactly once, minus ``per_char`` per non-blank character after the
    last ``</answer>``, at most ``max_penalty`` (the gist counted that text twice and without a
    cap). Range −0.375 … +0.5.

    >>> reward = XmlCount()
    >>> reward(completions=["<reasoning>\\nA\\n</reasoning>\\n<answer>\\n4\\n</answer>\\n",
    ...                     "<reasoning>\\nA\\n</reasoning>\\n<answer>\\n4\\n</answer>\\nbye!", "4"])
    [0.5, 0.496, 0.0]
    """

    name = "xmlcount"

    per_tag: float = 0.125
    per_char: float = 0.001
    max_penalty: float = 0.5

    def validate(self) -> None:
        super().validate()
        for param in ("per_tag", "per_char", "max_penalty"):
            self.require(getattr(self, param) >= 0, param, "must be >= 0")

    def score_completion(self, text: str, gold: Any) -> float:
        r, a = self.reasoning_tag, self.answer_tag
        pieces = (f"<{r}>\n", f"\n</{r}>\n", f"\n<{a}>\n", f"\n</{a}>")
        total = sum(self.per_tag for piece in pieces if text.count(piece) == 1)
        if text.count(pieces[-1]) == 1:
            trailing = text[text.rfind(f"</{a}>") + len(a) + 3 :]
            total -= min(self.max_penalty, self.per_char * len(trailing.strip()))
        return total

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.per_tag - self.max_penalty), 4 * self.per_tag
