"""Small files written so that a crash mid-write leaves the previous version intact."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling, flush it to disk, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as indented JSON, written atomically."""
    write_text_atomic(path, json.dumps(data, indent=2))
