"""Every config field with its type, its value in a config and its help text: ``run_training.py --help-config``,
and the same as the Markdown page ``docs/config.md`` (``python -m llm_finetuning.config.explain``).

The help comes from each field's ``metadata["help"]``, the same text the dataclasses carry, so neither the
listing nor the page can drift from the code (a test compares the committed page with ``markdown()``).

    >>> from llm_finetuning.config import PipelineConfig
    >>> print(explain(PipelineConfig()).splitlines()[0])
    output_dir: str = 'outputs'  # checkpoints, logs, metrics, plots and the final adapter
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterator
from typing import Any


def explain(config: Any) -> str:
    """One line per field, ``section.field: type = value  # help``, sections in declaration order."""
    return "\n".join(_lines(config, prefix=""))


def markdown(config: Any) -> str:
    """``docs/config.md``: every field of ``config`` with its type, default and help, a table per section."""
    rows = ["# Every config field", "",
            "Generated from the config's dataclasses (`uv run python -m llm_finetuning.config.explain > docs/config.md`;",
            "`run_training.py --help-config` prints the same with a config's own values). Set any field in a YAML",
            "config or on the command line with `--set section.field=value`.", ""]  # fmt: skip
    sections = [("top level", "", config)] + [
        (f.name, f.metadata.get("help", ""), getattr(config, f.name)) for f in dataclasses.fields(config)
        if dataclasses.is_dataclass(getattr(config, f.name))
    ]  # fmt: skip
    for title, help_text, section in sections:
        rows += [f"## {title}" if title == "top level" else f"## `{title}`", ""]
        rows += [help_text, ""] if help_text else []
        rows += ["| field | type | default | what it does |", "| --- | --- | --- | --- |"]
        prefix = "" if title == "top level" else f"{title}."
        fields = [line for line in _lines(section, prefix) if " = " in line.split("  # ")[0]]
        rows += [_row(line) for line in fields if prefix or "." not in line.partition(":")[0]]
        rows.append("")
    return "\n".join(rows)


def _row(line: str) -> str:
    field, _, rest = line.partition(": ")
    declared, _, help_text = rest.partition("  # ")
    kind, _, default = declared.partition(" = ")
    cells = (f"`{field}`", f"`{kind}`", f"`{default}`", help_text)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _lines(section: Any, prefix: str) -> Iterator[str]:
    hints = typing.get_type_hints(type(section))
    for field in dataclasses.fields(section):
        if field.name == "trl":  # TRL's fields the section sets: listed by their own names below
            yield from _trl_lines(section, prefix)
            continue
        value, name = getattr(section, field.name), prefix + field.name
        help_text = field.metadata.get("help", "")
        if dataclasses.is_dataclass(value):
            yield f"{name}:  # {help_text}" if help_text else f"{name}:"
            yield from _lines(value, prefix=f"{name}.")
            continue
        yield f"{name}: {_type_name(hints[field.name])} = {value!r}" + (
            f"  # {help_text}" if help_text else ""
        )


def _trl_lines(section: Any, prefix: str) -> Iterator[str]:
    """The TRL fields a section sets (ours by default, or the config's), each with TRL's help; then a line for
    every other field of TRL's class."""
    from .trl_fields import trl_annotation, trl_help

    trl_class = section.TRL_CLASS
    for name, value in section.trl_settings().items():
        ours = section.OUR_DEFAULTS.get(name)
        kind = trl_annotation(trl_class, name)
        if value is None and "None" not in kind:  # ours: null = a rule of ours (the reason says which)
            kind = f"{kind} | None"
        why = f" [TRL's field; our default {ours.value!r}: {ours.why}]" if ours else " [TRL's field]"
        yield f"{prefix}{name}: {kind} = {value!r}  # {_first_sentence(trl_help(trl_class, name))}{why}"
    example = {"SFTConfig": "neftune_noise_alpha: 5", "GRPOConfig": "top_entropy_quantile: 0.2"}[trl_class]
    yield f"{prefix}<any field of TRL's {trl_class}>: by its own name, with TRL's default and meaning  # e.g. {example}"


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[a-z0-9)`])\. ", text, maxsplit=1)[0]
    return sentence if sentence.endswith(".") or not sentence else f"{sentence}."


def _type_name(annotation: Any) -> str:
    text = (
        str(annotation) if typing.get_origin(annotation) else getattr(annotation, "__name__", str(annotation))
    )
    return re.sub(r"llm_finetuning\.config\.\w+\.", "", text.replace("typing.", ""))


if __name__ == "__main__":
    from . import PipelineConfig

    print(markdown(PipelineConfig()))
