"""Errors a user can fix: each message is one line naming the problem and the fix.

The CLI catches ``PipelineError`` at the edge, prints the message and exits 2; anything else is a bug and
keeps its traceback.
"""


class PipelineError(Exception):
    """Base of every error caused by the user's input (config, data, model choice, environment)."""


class DataError(PipelineError):
    """A dataset cannot be loaded or processed (missing column, empty after filtering, unreachable Hub)."""


class ModelError(PipelineError):
    """A model, tokenizer or adapter cannot be loaded or saved as asked (wrong backend, missing files)."""


class TrainingInterrupted(PipelineError):
    """SIGINT/SIGTERM stopped a phase; a checkpoint was saved and ``--resume`` continues from it."""
