"""The ``Reward`` protocol every reward shares, and the checking of its parameters.

A reward is a dataclass deriving from ``Reward``. Its fields are its parameters (typed, with the
defaults that reproduce its source), ``validate()`` checks their values, ``score_completion(text,
gold)`` scores one completion and ``bounds()`` gives its range. The base class supplies the rest of
the contract GRPO relies on:

* TRL's calling convention: ``reward(prompts=..., completions=..., completion_ids=..., answer=..., **kw)``
  with completions as plain strings or chat messages; one float per completion, or ``None`` where the
  reward does not apply (an answer reward called without an ``answer`` column, or without the column
  its ``gold_column`` names);
* it never raises: an internal error is logged once per reward and scored as the reward's minimum;
* ``__name__`` is the registered name, so TRL logs ``rewards/<name>/mean``;
* instances are plain picklable objects (no closures), safe to share between threads.

Parameter types are checked by the config loader's own checker (``schema.convert``), so a
reward parameter and a config field accept and refuse the same values, with the same messages.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import typing
from typing import Any, ClassVar

from ..schema import ConfigError, closest, convert
from .text import completion_text

logger = logging.getLogger(__name__)

# Rewards that have already logged an internal error (log once per reward name and process).
_LOGGED_ERRORS: set[str] = set()


class RewardParamError(ValueError):
    """A reward parameter has an unknown name, the wrong type or a value out of range."""


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest choice, or ``""`` when none is close."""
    match = closest(word, choices)
    return f" (did you mean '{match}'?)" if match else ""


@dataclasses.dataclass
class Reward:
    """Base of every reward; subclasses are dataclasses whose fields are the reward's parameters."""

    name: ClassVar[str] = ""
    needs_answer: ClassVar[bool] = False  # scores against the dataset's ``gold_column``
    gold_column: ClassVar[str] = "answer"  # the dataset column score_completion receives as ``gold``
    uses_grader: ClassVar[bool] = False  # asks the math grader (which may need its sympy worker)
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
                    f"{cls.name}: unknown parameter '{key}'{did_you_mean(key, cls.param_names())}; "
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
            setattr(self, f.name, self._checked(f.name, getattr(self, f.name), hints[f.name]))
        self.validate()

    def _checked(self, param: str, value: Any, hint: Any) -> Any:
        """``value`` converted to the field's type by the config loader's checker; a reward's tuple
        fields (immutable defaults) are checked as the lists a config gives."""
        where = f"{self.name}: parameter '{param}'"
        if isinstance(value, float) and not math.isfinite(value):
            raise RewardParamError(f"{where} must be a finite number (got {value!r})")
        try:
            if typing.get_origin(hint) is tuple:
                items = list(value) if isinstance(value, tuple) else value
                value = tuple(convert(list[typing.get_args(hint)[0]], items, where))
            else:
                value = convert(hint, value, where)
        except ConfigError as exc:
            raise RewardParamError(str(exc)) from None
        return value

    def validate(self) -> None:
        """Check parameter values; raise ``RewardParamError`` naming the parameter."""

    def start(self) -> None:
        """Start, in the background, the worker process the scoring needs (the grader's sympy worker, a
        sandboxed verifier), so the first completion finds it ready; returns at once."""
        if self.uses_grader:
            from ..grading import start_worker

            start_worker()

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
        golds = kwargs.get(self.gold_column)
        if self.needs_answer and golds is None:
            return [None] * len(completions)
        golds = _as_list(golds, len(completions))
        return [self._safe_score(c, golds[i] if i < len(golds) else None) for i, c in enumerate(completions)]

    def _safe_score(self, completion: Any, gold: Any) -> float | None:
        if self.needs_answer and gold is None:
            return None
        try:
            score = self.score_completion(completion_text(completion), gold)
            return None if score is None else float(score)  # None: the reward does not apply to this row
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
