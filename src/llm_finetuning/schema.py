"""Turn plain YAML data into typed dataclasses, with errors a person can act on: the config sections
(``config/``) and the rewards' parameters (``rewards/base.py``) are both loaded here.

Why not a library: the rules we need are few and specific. An unknown key names the closest valid key, a
wrong type names the key, the expected type and the value, and a rule broken in a ``__post_init__`` is
reported with the dotted path of the section it lives in. Every problem is a ``ConfigError`` whose message
is one line, so the CLI can print it and exit 2.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any, Literal, Union

import yaml

from .errors import PipelineError


class ConfigError(PipelineError, ValueError):
    """A problem with the configuration or the command line; the message is one line naming the fix."""


_YAML_BOOL_WORDS = {False: ("no", "off", "false"), True: ("yes", "on", "true")}


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING) -> Any:
    """A config field with its help text in ``metadata["help"]`` (shown by ``--help-config``), as TRL does."""
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


def require(condition: bool, key: str, message: str) -> None:
    """A rule of one section: ``key: message`` as a ConfigError (the section path is added by the loader)."""
    if not condition:
        raise ConfigError(f"{key}: {message}")


def closest(word: str, choices: typing.Iterable[str]) -> str | None:
    """The valid name ``word`` was most likely meant to be (for "did you mean ...?"), or None."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return matches[0] if matches else None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def build_dataclass(cls: type, raw: Any, path: str) -> Any:
    """Build ``cls`` from a mapping, checking keys and types recursively."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping of fields, got {raw!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    if hasattr(cls, "sort_keys"):  # a section that also holds a library's fields by name (config/trl_fields.py)
        raw = cls.sort_keys(raw, set(fields), path)
    for key in raw:
        if key not in fields:
            raise ConfigError(f"{_join(path, str(key))}: unknown key{_suggestion(str(key), fields)}")
    kwargs = {key: convert(hints[key], value, _join(path, key)) for key, value in raw.items()}
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if not path or message.startswith(path) else f"{path}.{message}") from None


def _suggestion(key: str, valid: typing.Iterable[str]) -> str:
    match = closest(key, valid)
    return f"; did you mean {match}?" if match else f"; valid keys: {', '.join(sorted(valid))}"


def convert(annotation: Any, value: Any, path: str) -> Any:
    """Check ``value`` against a type annotation and return it converted (ints to floats, dicts to dataclasses)."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return convert(option, value, path)
            except ConfigError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is Literal:
        choices = typing.get_args(annotation)
        if isinstance(value, bool):  # YAML 1.1 reads a bare no/yes/off/on as a bool: take back the word
            value = next((c for c in choices if str(c).lower() in _YAML_BOOL_WORDS[value]), value)
        if value not in choices:
            raise ConfigError(f"{path}: expected one of {', '.join(map(str, choices))}; got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{path}: expected a list, got {value!r} ({type(value).__name__})")
        (item_type,) = typing.get_args(annotation)
        return [convert(item_type, item, f"{path}[{index}]") for index, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r} ({type(value).__name__})")
        return dict(value)
    if dataclasses.is_dataclass(annotation):
        return build_dataclass(annotation, value, path)
    return _convert_scalar(annotation, value, path)


def _convert_scalar(annotation: Any, value: Any, path: str) -> Any:
    if annotation is Any:
        return value
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        # YAML 1.1 reads `1e-5` (no dot) as a string; accept it as the number everyone means.
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is not None:
            if not math.isfinite(number):  # .inf and .nan parse as floats; no setting means them
                raise ConfigError(f"{path}: must be a finite number, got {value!r}")
            return number
    elif annotation is str:
        if isinstance(value, str):
            return value
    else:
        raise TypeError(f"{path}: unsupported annotation {annotation!r}")
    raise ConfigError(f"{path}: expected {annotation.__name__}, got {value!r} ({type(value).__name__})")


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Apply one ``section.field=value`` override to the raw mapping (value parsed as a YAML scalar)."""
    key, sep, text = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            f"--set {override!r}: expected section.field=value (e.g. grpo_training.max_steps=50)"
        )
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    parts = key.split(".")
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def merge_onto_defaults(defaults: Any, raw: Any) -> Any:
    """Deep-merge user mappings onto the defaults; lists and scalars given by the user replace the default."""
    if not isinstance(defaults, dict) or not isinstance(raw, dict):
        return raw
    merged = dict(defaults)
    for key, value in raw.items():
        merged[key] = merge_onto_defaults(defaults[key], value) if key in defaults else value
    return merged


def to_plain(obj: Any) -> Any:
    """Dataclasses to dicts, recursively (the inverse of build_dataclass)."""
    if dataclasses.is_dataclass(obj) and hasattr(obj, "plain"):
        return to_plain(obj.plain())
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [to_plain(item) for item in obj]
    if isinstance(obj, dict):
        return {key: to_plain(value) for key, value in obj.items()}
    if callable(obj) and not isinstance(obj, type):  # a reward handed in from Python: named by where it lives
        return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"
    return obj
