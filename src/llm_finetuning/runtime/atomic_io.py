"""Small files written so that a crash mid-write leaves the previous version intact."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling (a name of its own per writer), flush it to disk, then rename over
    ``path``; a failed write leaves ``path`` as it was and no temporary file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as indented JSON, written atomically."""
    write_text_atomic(path, json.dumps(data, indent=2))
