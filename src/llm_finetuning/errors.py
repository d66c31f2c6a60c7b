"""Errors a user can fix: each message is one line naming the problem and the fix.

The CLI catches ``PipelineError`` at the edge, prints the message and exits 2; anything else is a bug and
keeps its traceback.
"""

import re


class PipelineError(Exception):
    """Base of every error caused by the user's input (config, data, model choice, environment)."""


class DataError(PipelineError):
    """A dataset cannot be loaded or processed (missing column, empty after filtering, unreachable Hub)."""


class ModelError(PipelineError):
    """A model, tokenizer or adapter cannot be loaded or saved as asked (wrong backend, missing files)."""


class TrainingInterrupted(PipelineError):
    """SIGINT/SIGTERM stopped a phase; a checkpoint was saved and ``--resume`` continues from it."""


def os_error_code(exc: BaseException) -> int | None:
    """The errno of a write the operating system refused: an ``OSError``'s, or one a library reports in its own
    exception's text (safetensors writes Rust's ``… (os error 28)`` for a full disk); None for anything else."""
    if isinstance(exc, OSError):
        return exc.errno
    found = re.search(r"\(os error (\d+)\)", str(exc))
    return int(found.group(1)) if found else None
