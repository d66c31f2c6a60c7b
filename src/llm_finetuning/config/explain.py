"""Every config field with its type, its value in a config and its help text: ``run_training.py --help-config``.

The help comes from each field's ``metadata["help"]``, the same text the dataclasses carry, so the listing
cannot drift from the code.

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


def _lines(section: Any, prefix: str) -> Iterator[str]:
    hints = typing.get_type_hints(type(section))
    for field in dataclasses.fields(section):
        value, name = getattr(section, field.name), prefix + field.name
        help_text = field.metadata.get("help", "")
        if dataclasses.is_dataclass(value):
            yield f"{name}:  # {help_text}" if help_text else f"{name}:"
            yield from _lines(value, prefix=f"{name}.")
            continue
        yield f"{name}: {_type_name(hints[field.name])} = {value!r}" + (
            f"  # {help_text}" if help_text else ""
        )


def _type_name(annotation: Any) -> str:
    text = (
        str(annotation) if typing.get_origin(annotation) else getattr(annotation, "__name__", str(annotation))
    )
    return re.sub(r"llm_finetuning\.config\.\w+\.", "", text.replace("typing.", ""))
