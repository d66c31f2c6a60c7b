"""What every reward shares: the ``Reward`` base class, parameter checking and text helpers.

A reward is a dataclass deriving from ``Reward``. Its fields are its parameters (typed, with the
defaults that reproduce its source), ``validate()`` checks their values, ``score_completion(text,
gold)`` scores one completion and ``bounds()`` gives its range. The base class supplies the rest of
the contract GRPO relies on:

* TRL's calling convention: ``reward(prompts=..., completions=..., completion_ids=..., answer=..., **kw)``
  with completions as plain strings or chat messages; one float per completion, or ``None`` where the
  reward does not apply (an answer reward called without an ``answer`` column);
* it never raises: an internal error is logged once per reward and scored as the reward's minimum;
* ``__name__`` is the registered name, so TRL logs ``rewards/<name>/mean``;
* instances are plain picklable objects (no closures), safe to share between threads.

Parsing uses ``str.find``/``str.count`` and regexes without nested quantifiers, so every format check
runs in time linear in the completion's length.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import re
import types
import typing
from typing import Any, ClassVar, Literal

logger = logging.getLogger(__name__)

# End-of-sequence markers that may survive decoding as text after the final tag.
DEFAULT_EOS_TEXTS = ("<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "</s>", "<eos>")

# Rewards that have already logged an internal error (log once per reward name and process).
_LOGGED_ERRORS: set[str] = set()


class RewardParamError(ValueError):
    """A reward parameter has an unknown name, the wrong type or a value out of range."""


def closest(word: str, choices: typing.Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or ``""`` when none is close."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


@dataclasses.dataclass
class Reward:
    """Base of every reward; subclasses are dataclasses whose fields are the reward's parameters."""

    name: ClassVar[str] = ""
    needs_answer: ClassVar[bool] = False  # scores against the dataset's ``answer`` column
    presets: ClassVar[dict[str, dict[str, Any]]] = {}  # named parameter sets for ``preset=``

    @property
    def __name__(self) -> str:  # TRL names the reward's metrics after this
        return self.name

    @classmethod
    def param_names(cls) -> list[str]:
        """The parameters ``from_params`` accepts: the dataclass fields, plus ``preset`` if it has any."""
        return [f.name for f in dataclasses.fields(cls)] + (["preset"] if cls.presets else [])

    @classmethod
    def from_params(cls, **params: Any) -> Reward:
        """Build from user parameters: reject unknown names, apply ``preset``, then type/value checks.

        A preset is a named set of parameter values; parameters given explicitly win over it.
        """
        for key in params:
            if key not in cls.param_names():
                raise RewardParamError(
                    f"{cls.name}: unknown parameter '{key}'{closest(key, cls.param_names())}; "
                    f"valid parameters: {', '.join(cls.param_names()) or '(none)'}"
                )
        preset = params.pop("preset", None)
        if preset is not None:
            if not isinstance(preset, str) or preset not in cls.presets:
                raise RewardParamError(
                    f"{cls.name}: parameter 'preset' must be one of {sorted(cls.presets)} or null (got {preset!r})"
                )
            params = {**cls.presets[preset], **params}
        return cls(**params)

    def __post_init__(self) -> None:
        hints = _type_hints(type(self))
        for f in dataclasses.fields(self):
            value = _check_type(self.name, f.name, getattr(self, f.name), hints[f.name])
            setattr(self, f.name, value)
        self.validate()

    def validate(self) -> None:
        """Check parameter values; raise ``RewardParamError`` naming the parameter."""

    def require(self, ok: bool, param: str, rule: str) -> None:
        if not ok:
            raise RewardParamError(f"{self.name}: parameter '{param}' {rule} (got {getattr(self, param)!r})")

    def score_completion(self, text: str, gold: Any) -> float | None:
        raise NotImplementedError

    def bounds(self) -> tuple[float, float]:
        """The lowest and highest value ``score_completion`` can return."""
        raise NotImplementedError

    def __call__(
        self, prompts: Any = None, completions: Any = None, completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        completions = list(completions or [])
        golds = kwargs.get("answer")
        if self.needs_answer and golds is None:
            return [None] * len(completions)
        golds = _as_list(golds, len(completions))
        return [self._safe_score(c, golds[i] if i < len(golds) else None) for i, c in enumerate(completions)]

    def _safe_score(self, completion: Any, gold: Any) -> float | None:
        if self.needs_answer and gold is None:
            return None
        try:
            return float(self.score_completion(completion_text(completion), gold))
        except Exception:  # a reward must never stop training; the minimum is the safe score
            if self.name not in _LOGGED_ERRORS:
                _LOGGED_ERRORS.add(self.name)
                logger.exception(
                    "reward %s failed on a completion; scoring it %s", self.name, self.bounds()[0]
                )
            return self.bounds()[0]


def _as_list(column: Any, length: int) -> list[Any]:
    """A dataset column as a list; a lone value (not TRL's form, but seen in hand calls) is repeated."""
    if column is None:
        return []
    if isinstance(column, (list, tuple)):
        return list(column)
    if isinstance(column, (str, int, float)):
        return [column] * length
    try:
        return list(column)
    except TypeError:
        return [column] * length


def _type_hints(cls: type) -> dict[str, Any]:
    cached = cls.__dict__.get("_hints_cache")
    if cached is None:
        cached = typing.get_type_hints(cls)
        cls._hints_cache = cached  # type: ignore[attr-defined]
    return cached


def _check_type(reward: str, param: str, value: Any, hint: Any) -> Any:
    """Return ``value`` (lists become tuples) if it fits ``hint``; else raise naming the parameter."""
    ok, value = _fits(value, hint)
    if not ok:
        raise RewardParamError(
            f"{reward}: parameter '{param}' must be {_describe(hint)} (got {type(value).__name__} {value!r})"
        )
    return value


def _fits(value: Any, hint: Any) -> tuple[bool, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            ok, converted = _fits(value, arg)
            if ok:
                return True, converted
        return False, value
    if origin is Literal:
        return value in args, value
    if origin is tuple:  # tuple[str, ...]
        if not isinstance(value, (list, tuple)):
            return False, value
        return all(_fits(v, args[0])[0] for v in value), tuple(value)
    if hint is type(None):
        return value is None, value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        try:
            number = float(value)
        except OverflowError:
            return False, value
        return math.isfinite(number), number
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    return isinstance(value, hint), value


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        return f"a list of {_describe(args[0])}"
    if hint is type(None):
        return "null"
    return {float: "a finite number", int: "an integer", bool: "true or false", str: "a string"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


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
    """True when ``text`` holds nothing but whitespace and end-of-sequence markers."""
    if not text.strip():
        return True
    for eos in eos_texts:
        if eos:
            text = text.replace(eos, "")
    return not text.strip()


def strip_trailing_eos(text: str, eos_texts: tuple[str, ...]) -> str:
    """``text`` without trailing whitespace and end-of-sequence markers (in any order)."""
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
    """The gold answer as text (the first one when a list of acceptable answers is given)."""
    if isinstance(gold, (list, tuple)):
        return gold_text(gold[0]) if gold else ""
    return gold if isinstance(gold, str) else str(gold)


def gold_candidates(gold: Any) -> list[str]:
    """Every acceptable gold answer as text."""
    if isinstance(gold, (list, tuple)):
        return [gold_text(g) for g in gold if g is not None]
    return [gold_text(gold)]


# A number: digits with optional thousands separators and decimals, or a bare decimal (.5).
_NUMBER = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")


def first_number(text: str, start: int = 0) -> float | None:
    """The first number in ``text[start:]`` with thousands separators removed, or ``None``.

    >>> first_number("so x = 1,234.5 and 7")
    1234.5
    """
    match = _NUMBER.search(text, start)
    return float(match.group().replace(",", "")) if match else None


def parse_float(text: str) -> float | None:
    """``float(text)`` after removing thousands separators, or ``None`` when it is not a number."""
    try:
        return float(text.strip().replace(",", ""))
    except (ValueError, OverflowError):
        return None


def grader() -> types.ModuleType:
    """The shared math grader, imported on first use so that building rewards stays cheap."""
    from . import math_grading

    return math_grading
