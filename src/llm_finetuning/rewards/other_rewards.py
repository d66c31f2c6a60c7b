"""Style rewards from the DeepSeek-R1-Zero tutorial: step-by-step reasoning and no repetition.

Neither needs the gold answer. Both are linear in the completion length.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .base import Reward

DEFAULT_STEP_MARKERS = ("\n-", "\n*", "First,", "Second,", "Next,", "Finally,")


@dataclasses.dataclass
class ReasoningSteps(Reward):
    """``min(1, steps / target_steps) * score``, counting step markers: ``Step N:`` and ``N.`` at a
    line start when ``numbered`` is on, plus each string in ``markers`` (the tutorial's regex
    ``(Step \\d+:|^\\d+\\.|\\n-|\\n\\*|First,|Second,|Next,|Finally,)``). Range 0 … +1.0.

    >>> reward = ReasoningSteps()
    >>> reward(completions=["Step 1: add.\\nStep 2: carry.\\nFinally, 42", "First, add. Next, 42", "42"])
    [1.0, 0.6666666666666666, 0.0]
    """

    name = "reasoning_steps"

    markers: tuple[str, ...] = DEFAULT_STEP_MARKERS
    numbered: bool = True
    target_steps: int = 3
    score: float = 1.0

    def validate(self) -> None:
        self.require(self.target_steps > 0, "target_steps", "must be > 0")
        self.require(all(self.markers), "markers", "must not contain an empty string")
        self.require(
            bool(self.markers) or self.numbered, "markers", "must not be empty when numbered is false"
        )

    def __post_init__(self) -> None:
        super().__post_init__()
        # No nested quantifiers: each alternative is a literal or ``\d+`` then a literal, so linear.
        numbered = [r"Step \d+:", r"^\d+\."] if self.numbered else []
        self._pattern = re.compile("|".join(numbered + [re.escape(m) for m in self.markers]), re.MULTILINE)

    def score_completion(self, text: str, gold: Any) -> float:
        steps = 0
        for _ in self._pattern.finditer(text):
            steps += 1
            if steps >= self.target_steps:  # enough for the full score: stop scanning
                break
        return min(1.0, steps / self.target_steps) * self.score

    def bounds(self) -> tuple[float, float]:
        return min(0.0, self.score), max(0.0, self.score)


@dataclasses.dataclass
class RepetitionPenalty(Reward):
    """``max_penalty`` times the share of repeated word n-grams (lower-cased, split on whitespace), as
    open-r1's ``get_repetition_penalty_reward``; 0 for text shorter than one n-gram. Defaults are the
    R1-Zero tutorial's. Range −0.1 … 0.

    >>> reward = RepetitionPenalty(max_penalty=-1.0)
    >>> reward(completions=["one two three four", "la la la la la", ""])
    [0.0, -0.6666666666666667, 0.0]
    """

    name = "repetition_penalty"

    ngram_size: int = 3
    max_penalty: float = -0.1

    def validate(self) -> None:
        self.require(self.ngram_size >= 1, "ngram_size", "must be >= 1")
        self.require(self.max_penalty <= 0, "max_penalty", "must be <= 0 (it is a penalty)")

    def score_completion(self, text: str, gold: Any) -> float:
        words = text.lower().split()
        if len(words) < self.ngram_size:
            return 0.0
        total = len(words) - self.ngram_size + 1
        repeated = 1 - len(set(zip(*(words[i:] for i in range(self.ngram_size))))) / total
        return repeated * self.max_penalty if repeated else 0.0

    def bounds(self) -> tuple[float, float]:
        return self.max_penalty, 0.0
