"""Logging for a run: one logger per module, shown on the console and appended to ``<output_dir>/training.log``.

Called once by the entry points; library code only calls ``logging.getLogger(__name__)``. In a multi-process
run only the main process writes ``training.log`` and logs at the configured level; every other rank logs
warnings and errors to the console only, prefixed with its rank, so N processes do not print N copies.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FILE_HANDLER_NAME = "llm_finetuning.training_log"


def setup_logging(level: str = "INFO", output_dir: str | Path | None = None, rank: int = 0) -> None:
    """Console handler on the root logger, plus ``training.log`` in ``output_dir`` when given (rank 0 only)."""
    root = logging.getLogger()
    root.setLevel(level if rank == 0 else logging.WARNING)
    prefix = "" if rank == 0 else f"[rank {rank}] "
    console = next((h for h in root.handlers if getattr(h, "name", "") == "llm_finetuning.console"), None)
    if console is None:
        console = logging.StreamHandler(sys.stderr)
        console.name = "llm_finetuning.console"
        root.addHandler(console)
    console.setFormatter(logging.Formatter(prefix + "%(levelname)s %(name)s: %(message)s"))
    if output_dir is not None and rank == 0:
        add_log_file(Path(output_dir) / "training.log")
    # transformers 5 warns on every trainer about renamed gradient-checkpointing arguments we do not use
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    for noisy in ("httpx", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def add_log_file(path: Path) -> None:
    """Append every record to ``path`` (replacing an earlier run file handler of ours)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "name", "") == _FILE_HANDLER_NAME]:
        root.removeHandler(handler)
        handler.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.name = _FILE_HANDLER_NAME
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
