"""Answer rewards: is the completion's answer right? All read the dataset's ``answer`` column and give
``None`` (does not apply) when it is missing.

``check_answer`` and ``check_numbers`` are the Unsloth Qwen3 GRPO notebook's graded string/number
checks; ``accuracy``, ``cosine`` and ``r1_zero`` ask the shared math grader (``llm_finetuning.grading``),
the same one evaluation uses, so the number GRPO optimises is the number we report.

Preset ``unsloth_qwen3_notebook``: the scores of Unsloth's Qwen3 (4B) GRPO notebook
(``unslothai/notebooks``, ``nb/Qwen3_(4B)-GRPO.ipynb``, read from a public export of it): check_answer
gives −2.0 without an answer, +5.0 exact, +3.5 equal after stripping, +2.0 / +1.5 for a ratio within
10 % / 20 %, −2.5 for another number and −4.5 when the answer is not a number (range −4.5 … +5.0);
check_numbers gives −2.5 without a number, +3.5 equal, −1.5 different and 0 when the gold answer is
not a number (range −2.5 … +3.5).

Preset ``graded`` (check_answer): the notebook's scores, but its ``exact`` tier is the shared grader's
equivalence (``exact_match: grader``), so training with the notebook's rewards optimises the accuracy
evaluation reports: ``\\frac{7}{2}`` earns ``exact`` for a gold ``3.5``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

from .. import grading
from ..grading.extract import first_number, parse_number
from .base import Reward
from .format_rewards import exact_solution
from .text import DEFAULT_EOS_TEXTS, gold_candidates, gold_text

UNSLOTH = "unsloth_qwen3_notebook"


def _same_text(guess: str, gold: Any) -> bool:
    """The notebook's exact tier: the answer is the gold string."""
    return guess == gold_text(gold)


def _graded_equal(guess: str, gold: Any) -> bool:
    """The shared grader's verdict on the answer, as evaluation's accuracy reads it."""
    return any(grading.is_equivalent(guess, candidate) for candidate in gold_candidates(gold))


EXACT_MATCHES = {"string": _same_text, "grader": _graded_equal}  # check_answer's exact_match choices


def _tags_required(reward: Reward, *tags: str) -> None:
    for tag in tags:
        reward.require(bool(getattr(reward, tag)), tag, "must be a non-empty tag")


@dataclasses.dataclass
class CheckAnswer(Reward):
    """Grade the answer between the solution tags (the notebook's exact format, as its ``match_format``):
    ``no_answer`` if there is none, ``exact`` if it matches the gold (``exact_match``: ``"string"``,
    the notebook's, the same string; ``"grader"``, the shared grader finds them equal), ``stripped`` if
    equal after stripping whitespace, ``close``/``near`` if answer/gold is within
    ``close_ratio``/``near_ratio`` of 1, ``wrong`` for another number, ``not_numeric`` when either is
    not a number. Range −2.0 … +5.0.

    >>> reward = CheckAnswer()
    >>> done = "<end_working_out><SOLUTION>{}</SOLUTION>"
    >>> reward(completions=[done.format("42"), done.format(" 42 "), done.format("44"), done.format("7"),
    ...                     "no tags 42"], answer=["42"] * 5)
    [5.0, 3.5, 2.0, -2.0, -2.0]
    >>> CheckAnswer.from_params(preset="unsloth_qwen3_notebook").bounds()
    (-4.5, 5.0)
    >>> graded = CheckAnswer.from_params(preset="graded")  # the exact tier is the grader's verdict
    >>> graded(completions=[done.format("\\\\frac{7}{2}"), done.format("3.50"), done.format("7")],
    ...        answer=["3.5"] * 3), reward(completions=[done.format("\\\\frac{7}{2}")], answer=["3.5"])
    ([5.0, 5.0, -2.0], [-2.0])
    """

    name = "check_answer"
    needs_answer = True
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        UNSLOTH: {"wrong": -2.5, "not_numeric": -4.5},
        "graded": {"exact_match": "grader"},
    }

    reasoning_end: str = "<end_working_out>"
    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    exact: float = 5.0
    stripped: float = 3.5
    close: float = 2.0
    close_ratio: float = 0.1
    near: float = 1.5
    near_ratio: float = 0.2
    wrong: float = -2.0
    not_numeric: float = -2.0
    no_answer: float = -2.0
    eos_texts: tuple[str, ...] = DEFAULT_EOS_TEXTS
    exact_match: Literal["string", "grader"] = "string"

    @property
    def uses_grader(self) -> bool:  # build_rewards starts the grader's worker for it
        return self.exact_match == "grader"

    def validate(self) -> None:
        _tags_required(self, "reasoning_end", "solution_start", "solution_end")
        self.require(self.close_ratio >= 0, "close_ratio", "must be >= 0")
        self.require(self.near_ratio >= self.close_ratio, "near_ratio", "must be >= close_ratio")

    def score_completion(self, text: str, gold: Any) -> float:
        guess = exact_solution(
            text, self.reasoning_end, self.solution_start, self.solution_end, self.eos_texts
        )
        if guess is None:
            return self.no_answer
        if EXACT_MATCHES[self.exact_match](guess, gold):
            return self.exact
        gold = gold_text(gold)
        if guess.strip() == gold.strip():
            return self.stripped
        try:
            ratio = float(guess) / float(gold)
        except (ValueError, ZeroDivisionError, OverflowError):
            return self.not_numeric
        if 1 - self.close_ratio <= ratio <= 1 + self.close_ratio:
            return self.close
        if 1 - self.near_ratio <= ratio <= 1 + self.near_ratio:
            return self.near
        return self.wrong

    def bounds(self) -> tuple[float, float]:
        values = (
            self.exact,
            self.stripped,
            self.close,
            self.near,
            self.wrong,
            self.not_numeric,
            self.no_answer,
        )
        return min(values), max(values)


@dataclasses.dataclass
class CheckNumbers(Reward):
    """The first number after the solution start tag (thousands separators removed) against the gold
    answer as a number: ``correct`` if equal, ``wrong`` if not, ``no_number`` if there is none,
    ``gold_not_numeric`` when the gold answer is not a number. Range −1.5 … +3.0.

    >>> reward = CheckNumbers()
    >>> reward(completions=["<SOLUTION>1,234</SOLUTION>", "<SOLUTION>x = 12</SOLUTION>", "<SOLUTION>?"],
    ...        answer=["1234", "13", "5"])
    [3.0, -1.5, -1.5]
    """

    name = "check_numbers"
    needs_answer = True
    presets: ClassVar[dict[str, dict[str, Any]]] = {UNSLOTH: {"correct": 3.5, "no_number": -2.5}}

    solution_start: str = "<SOLUTION>"
    correct: float = 3.0
    wrong: float = -1.5
    no_number: float = -1.5
    gold_not_numeric: float = 0.0

    def validate(self) -> None:
        _tags_required(self, "solution_start")

    def score_completion(self, text: str, gold: Any) -> float:
        start = text.find(self.solution_start)
        guess = first_number(text, start + len(self.solution_start)) if start >= 0 else None
        if guess is None:
            return self.no_number
        target = parse_number(gold_text(gold))
        if target is None:
            return self.gold_not_numeric
        return self.correct if guess == target else self.wrong

    def bounds(self) -> tuple[float, float]:
        values = (self.correct, self.wrong, self.no_number, self.gold_not_numeric)
        return min(values), max(values)


@dataclasses.dataclass
class Accuracy(Reward):
    """``correct`` when the shared grader finds the completion's answer mathematically equal to the
    gold answer, else ``wrong`` (open-r1's / the R1-Zero tutorial's accuracy reward). Range 0 … +1.0.

    >>> Accuracy()(completions=["<SOLUTION>4</SOLUTION>", "<SOLUTION>5</SOLUTION>"], answer=["4", "4"])
    [1.0, 0.0]
    """

    name = "accuracy"
    needs_answer = True
    uses_grader = True

    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    correct: float = 1.0
    wrong: float = 0.0

    def validate(self) -> None:
        _tags_required(self, "solution_start", "solution_end")

    def score_completion(self, text: str, gold: Any) -> float:
        return (
            self.correct
            if _graded_correct(text, gold, self.solution_start, self.solution_end)
            else self.wrong
        )

    def bounds(self) -> tuple[float, float]:
        return min(self.correct, self.wrong), max(self.correct, self.wrong)


def _graded_correct(text: str, gold: Any, solution_start: str, solution_end: str) -> bool:
    tags = {"solution_start": solution_start, "solution_end": solution_end}
    return any(grading.grade(text, candidate, **tags) for candidate in gold_candidates(gold))


@dataclasses.dataclass
class Cosine(Reward):
    """Correctness scaled by length along a half cosine (open-r1's ``get_cosine_scaled_reward``):
    correct answers score from ``max_value_correct`` (empty) down to ``min_value_correct`` (at
    ``max_len`` characters); wrong ones from ``min_value_wrong`` (empty) up to ``max_value_wrong``.
    Defaults are the R1-Zero tutorial's. Unlike open-r1, lengths past ``max_len`` count as ``max_len``
    (open-r1's cosine turns back up there). Range −0.5 … +1.0.

    >>> scores = Cosine(max_len=100)(completions=["<SOLUTION>4</SOLUTION>", "<SOLUTION>5</SOLUTION>"],
    ...                              answer=["4", "4"])  # 22 characters: 22 % of the way to max_len
    >>> [round(s, 3) for s in scores]
    [0.977, -0.454]
    """

    name = "cosine"
    needs_answer = True
    uses_grader = True

    solution_start: str = "<SOLUTION>"
    solution_end: str = "</SOLUTION>"
    min_value_wrong: float = -0.5
    max_value_wrong: float = -0.1
    min_value_correct: float = 0.8
    max_value_correct: float = 1.0
    max_len: int = 1000

    def validate(self) -> None:
        _tags_required(self, "solution_start", "solution_end")
        self.require(self.max_len > 0, "max_len", "must be > 0")
        self.require(
            self.max_value_wrong >= self.min_value_wrong, "max_value_wrong", "must be >= min_value_wrong"
        )
        self.require(
            self.max_value_correct >= self.min_value_correct,
            "max_value_correct",
            "must be >= min_value_correct",
        )

    def score_completion(self, text: str, gold: Any) -> float:
        progress = min(1.0, len(text) / self.max_len)
        cosine = math.cos(progress * math.pi)  # 1 for an empty completion, -1 at max_len
        if _graded_correct(text, gold, self.solution_start, self.solution_end):
            short, long = self.max_value_correct, self.min_value_correct
        else:
            short, long = self.min_value_wrong, self.max_value_wrong
        return long + 0.5 * (short - long) * (1.0 + cosine)

    def bounds(self) -> tuple[float, float]:
        return min(self.min_value_wrong, self.min_value_correct), max(
            self.max_value_wrong, self.max_value_correct
        )


@dataclasses.dataclass
class R1Zero(Reward):
    """Dr. GRPO's ``r1_zero_reward_fn`` (sail-sg/understand-r1-zero): the completion must contain
    ``</think> <answer>`` and ``</answer>``; the answer is the text after the last ``<answer>``, read
    as the grader reads any answer slot (its last ``\\boxed{}`` if it has one). 1.0 for the right format and a right answer, ``format_weight``
    for the right format only (0 in the original, which gives no format credit so it cannot be
    hacked), 0 otherwise. Range 0 … +1.0.

    >>> R1Zero(format_weight=0.1)(completions=["2+2 </think> <answer>4</answer>",
    ...                                        "2+2 </think> <answer>5</answer>", "<answer>4</answer>"],
    ...                           answer=["4", "4", "4"])
    [1.0, 0.1, 0.0]
    """

    name = "r1_zero"
    needs_answer = True
    uses_grader = True

    format_weight: float = 0.0
    timeout: float = 1.0

    def validate(self) -> None:
        self.require(0.0 <= self.format_weight <= 1.0, "format_weight", "must be in [0, 1]")
        self.require(self.timeout > 0, "timeout", "must be > 0")

    def score_completion(self, text: str, gold: Any) -> float:
        if "</think> <answer>" not in text or "</answer>" not in text:
            return 0.0
        answer = text[text.rfind("<answer>") + len("<answer>") :].replace("</answer>", "")
        correct = any(grading.is_equivalent(answer, c, timeout=self.timeout) for c in gold_candidates(gold))
        return 1.0 if correct else self.format_weight

    def bounds(self) -> tuple[float, float]:
        return 0.0, 1.0
