"""Format rewards: does the completion have the layout the prompt asked for?

``match_format_exactly`` and ``match_format_approximately`` are the Unsloth Qwen3 GRPO notebook's for ``…<end_working_out><SOLUTION>…</SOLUTION>``; ``format`` is the DeepSeek-R1-Zero tutorial's
``<think>…</think><answer>…</answer>`` check. The chat template prefills the opening reasoning tag,
so no reward here asks for it. All parsing is ``str.find`` based and linear in the completion length.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .base import Reward
from .text import DEFAULT_EOS_TEXTS, only_whitespace_or_eos, strip_trailing_eos


def exact_solution(
    text: str, reasoning_end: str, solution_start: str, solution_end: str, eos_texts: tuple[str, ...]
) -> str | None:
    """The answer of a completion in the exact notebook format, or ``None`` if the format is off.

    Exact format: the reasoning end tag, later a solution start tag, a non-blank answer up to the
    first solution end tag, then only whitespace and end-of-sequence markers. (Unsloth's regex ends in
    ``[\\s]{0,}$`` under ``re.MULTILINE``, which also accepts text after a newline; we do not.)

    >>> exact_solution("2+2=4<end_working_out><SOLUTION>4</SOLUTION><|im_end|>",
    ...                "<end_working_out>", "<SOLUTION>", "</SOLUTION>", ("<|im_end|>",))
    '4'
    """
    reasoning_at = text.find(reasoning_end)
    if reasoning_at < 0:
        return None
    start = text.find(solution_start, reasoning_at + len(reasoning_end))
    if start < 0:
        return None
    start += len(solution_start)
    end = text.find(solution_end, start)
    if end < 0 or not text[start:end].strip():
        return None
    if not only_whitespace_or_eos(text[end + len(solution_end) :], eos_texts):
        return None
    return text[start:end]


@dataclasses.dataclass
class MatchFormatExactly(Reward):
    """``score`` when the completion is ``…<end_working_out><SOLUTION>answer</SOLUTION>`` and nothing
    after it but whitespace or an end-of-sequence marker; else 0. Range 0 … +3.0.

    >>> reward = MatchFormatExactly()
    >>> reward(completions=["Think.<end_working_out><SOLUTION>4</SOLUTION>",
    ...                     "Think.<end_working_out><SOLUTION>4</SOLUTION> and more",
    ...                     [{"role": "assistant", "content": "No tags, 4"}]])
    [3.0, 0.0, 0.0]
    """

    name = "match_format_exactly"

    reasoning_end: str = "<end_working_out>"
    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    score: float = 3.0
    eos_texts: tuple[str, ...] = DEFAULT_EOS_TEXTS

    def validate(self) -> None:
        for tag in ("reasoning_end", "solution_start", "solution_end"):
            self.require(bool(getattr(self, tag)), tag, "must be a non-empty tag")

    def score_completion(self, text: str, gold: Any) -> float:
        found = exact_solution(
            text, self.reasoning_end, self.solution_start, self.solution_end, self.eos_texts
        )
        return self.score if found is not None else 0.0

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)


@dataclasses.dataclass
class MatchFormatApproximately(Reward):
    """For each of the reasoning end, solution start and solution end tags: ``once`` if it appears
    exactly once, else ``not_once``. Range −3.0 … +1.5.

    >>> reward = MatchFormatApproximately()
    >>> reward(completions=["a<end_working_out><SOLUTION>4</SOLUTION>",
    ...                     "a<end_working_out><SOLUTION>4",
    ...                     "<SOLUTION><SOLUTION>", ""])
    [1.5, 0.0, -3.0, -3.0]
    """

    name = "match_format_approximately"

    reasoning_end: str = "<end_working_out>"
    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    once: float = 0.5
    not_once: float = -1.0

    def validate(self) -> None:
        for tag in ("reasoning_end", "solution_start", "solution_end"):
            self.require(bool(getattr(self, tag)), tag, "must be a non-empty tag")

    def score_completion(self, text: str, gold: Any) -> float:
        tags = (self.reasoning_end, self.solution_start, self.solution_end)
        return sum(self.once if text.count(tag) == 1 else self.not_once for tag in tags)

    def bounds(self) -> tuple[float, float]:
        return 3 * min(self.once, self.not_once), 3 * max(self.once, self.not_once)


@dataclasses.dataclass
class ThinkAnswerFormat(Reward):
    """``score`` for ``<think>…</think>`` then only whitespace, then ``<answer>…</answer>`` ending
    the completion (trailing whitespace or end-of-sequence markers allowed); else 0. Range 0 … +1.0.

    As the DeepSeek-R1-Zero tutorial's ``^<think>.*?</think>\\s*<answer>.*?</answer>$``. Set
    ``require_think_start: false`` when the chat template prefills ``<think>``.

    >>> reward = ThinkAnswerFormat()
    >>> reward(completions=["<think>\\n2+2\\n</think>\\n<answer>4</answer>",
    ...                     "<think>2+2</think> The answer is <answer>4</answer>",
    ...                     "2+2</think><answer>4</answer>"])
    [1.0, 0.0, 0.0]
    """

    name = "format"

    think_start: str = "<think>"
    think_end: str = "</think>"
    answer_start: str = "<answer>"
    answer_end: str = "</answer>"
    require_think_start: bool = True
    score: float = 1.0
    eos_texts: tuple[str, ...] = DEFAULT_EOS_TEXTS

    def validate(self) -> None:
        for tag in ("think_start", "think_end", "answer_start", "answer_end"):
            self.require(bool(getattr(self, tag)), tag, "must be a non-empty tag")

    def score_completion(self, text: str, gold: Any) -> float:
        return self.score if self._matches(strip_trailing_eos(text.lstrip(), self.eos_texts)) else 0.0

    def _matches(self, text: str) -> bool:
        if text.startswith(self.think_start):
            text = text[len(self.think_start) :]
        elif self.require_think_start:
            return False
        think_at = text.find(self.think_end)
        if think_at < 0:
            return False
        rest = text[think_at + len(self.think_end) :].lstrip()
        return (
            rest.startswith(self.answer_start)
            and rest.endswith(self.answer_end)
            and len(rest) >= len(self.answer_start) + len(self.answer_end)
        )

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)
