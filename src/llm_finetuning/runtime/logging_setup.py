"""Logging for a run: one logger per module, shown on the console and appended to ``<output_dir>/training.log``.

Called once by the entry points; library code only calls ``logging.getLogger(__name__)``. In a multi-process
run only the main process writes ``training.log`` and logs at the configured level; every other rank logs
warnings and errors to the console only, prefixed with its rank, so N processes do not print N copies.

The console is for a person: our lines carry no level or module name (``training.log`` keeps both, with the
time), warnings say ``warning:``, and every line is written through ``tqdm.write``, so it passes above a live
progress bar (``reporting/progress.py``) instead of breaking it. ``quiet_libraries`` turns off what transformers,
datasets, huggingface_hub and vLLM print on their own — their progress bars for loading, saving and mapping,
their info messages — with each library's own switch, and routes their records through our handlers: a
library's warning goes to training.log only (the console says at the end how many there were), unless we know
it better and say it in our words (``LIBRARY_MESSAGES``); Python warnings raised inside installed packages
likewise. vLLM's own handler is off (``VLLM_CONFIGURE_LOGGING=0``), so its records take the same way; what its
C++ side prints while an engine starts goes to training.log too (``rollout.start``). ``--verbose`` leaves the
libraries as they come, on the console.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path
from typing import TextIO

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
VERBOSE_CONSOLE = "%(levelname)s %(name)s: %(message)s"
_FILE_HANDLER_NAME = "llm_finetuning.training_log"
_CONSOLE_NAME = "llm_finetuning.console"
PROJECT = "llm_finetuning"

# Library messages we know better than their wording suggests: the start of the message, and what the console
# says instead (None: training.log only).
LIBRARY_MESSAGES: dict[str, str | None] = {
    # checkpoints saved less than a second apart (short test schedules): ordering them by step is right
    "mtime may not be reliable on this filesystem": None,
}

_state = {"verbose": False}
_SITE = ("site-packages", "dist-packages")


def setup_logging(level: str = "INFO", output_dir: str | Path | None = None, rank: int = 0,
                  verbose: bool = False) -> None:  # fmt: skip
    """Console handler on the root logger, plus ``training.log`` in ``output_dir`` when given (rank 0 only);
    ``verbose`` (``--verbose``) keeps the full record format and, through ``quiet_libraries``, the libraries'
    own output."""
    _state["verbose"] = verbose
    root = logging.getLogger()
    root.setLevel(level if rank == 0 else logging.WARNING)
    console = next((h for h in root.handlers if getattr(h, "name", "") == _CONSOLE_NAME), None)
    if console is None:
        console = ConsoleHandler(sys.stderr)
        console.name = _CONSOLE_NAME
        root.addHandler(console)
    prefix = "" if rank == 0 else f"[rank {rank}] "
    console.setFormatter(logging.Formatter(prefix + VERBOSE_CONSOLE) if verbose else ConsoleFormatter(prefix))
    if not any(isinstance(f, _LibraryWarnings) for f in console.filters):
        console.addFilter(_LibraryWarnings())
    if output_dir is not None and rank == 0:
        add_log_file(Path(output_dir) / "training.log")
    # transformers 5 warns on every trainer about renamed gradient-checkpointing arguments we do not use
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    logging.captureWarnings(True)  # Python warnings through this console (above a bar) and into training.log
    for noisy in ("httpx", "urllib3", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def quiet_libraries(main: bool = True) -> None:
    """Turn off the libraries' own progress bars and info messages at their source, and route their log records
    through our console; under ``--verbose`` (``setup_logging``) leave them as they come, on the main process.

    Imports transformers: call it after the backend's ``prepare()`` (Unsloth must be imported first).
    """
    import datasets
    import huggingface_hub
    import transformers

    shown = _state["verbose"] and main
    if not shown:  # --verbose leaves their verbosity as they (or TRANSFORMERS_VERBOSITY and the like) set it
        for library in (transformers.utils.logging, datasets.utils.logging, huggingface_hub.utils.logging):
            library.set_verbosity(logging.WARNING)
    hub, hf = huggingface_hub.utils, transformers.utils.logging
    for enable, disable in ((hf.enable_progress_bar, hf.disable_progress_bar),
                            (datasets.enable_progress_bars, datasets.disable_progress_bars),
                            (hub.enable_progress_bars, hub.disable_progress_bars)):  # fmt: skip
        (enable if shown else disable)()
    # vLLM configures its own logger when imported (an engine's start, later): its INFO lines (arguments, KV
    # cache, weight reloads) are for --verbose; without its own handler its records reach ours (training.log);
    # an already imported vLLM gets the level directly
    os.environ["VLLM_LOGGING_LEVEL"] = "INFO" if shown else "WARNING"
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1" if shown else "0"
    logging.getLogger("vllm").setLevel(logging.INFO if shown else logging.WARNING)
    # torch warns at import that it found no CUDA runtime (vLLM's import, on a CPU): training.log's business
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.WARNING if shown else logging.ERROR)
    if not shown:  # SyntaxWarnings come from compiling installed code (cellpylib's, under reasoning-gym)
        warnings.filterwarnings("ignore", category=SyntaxWarning)
    transformers.utils.logging.disable_default_handler()  # its records reach training.log and pass the bars
    transformers.utils.logging.enable_propagation()
    for name in ("datasets", "huggingface_hub"):  # their own stderr handler would print every record twice
        library_logger = logging.getLogger(name)
        for handler in [h for h in library_logger.handlers if type(h) is logging.StreamHandler]:
            library_logger.removeHandler(handler)
        library_logger.propagate = True


def libraries_verbose() -> bool:
    """Whether ``--verbose`` asked for the libraries' own output (the trainers keep their bar and log lines)."""
    return _state["verbose"]


def console_stream() -> TextIO:
    """The stream the console handler writes to: progress bars draw there, so log lines can pass them."""
    console = next((h for h in logging.getLogger().handlers if getattr(h, "name", "") == _CONSOLE_NAME), None)
    return console.stream if console is not None else sys.stderr


def set_console_stream(stream: TextIO) -> None:
    """Point the console handler at ``stream`` (while file descriptor 2 goes elsewhere: ``native_output_to_log``)."""
    console = next((h for h in logging.getLogger().handlers if getattr(h, "name", "") == _CONSOLE_NAME), None)
    if console is not None:
        console.setStream(stream)


def log_file() -> str | None:
    """The path of training.log, when this process writes one."""
    handler = next((h for h in logging.getLogger().handlers if getattr(h, "name", "") == _FILE_HANDLER_NAME), None)
    return handler.baseFilename if handler is not None else None


class ConsoleHandler(logging.StreamHandler):
    """Writes each record through ``tqdm.write``: above any live progress bar on the same stream."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except Exception:  # noqa: BLE001 - logging must never raise into the run
            self.handleError(record)


class ConsoleFormatter(logging.Formatter):
    """``message`` for our information, ``warning: message`` (``warning (library): message``) for warnings."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        message = getattr(record, "console_text", None) or super().format(record)
        if logging.getLevelName(record.levelname) < logging.WARNING:
            return self.prefix + message
        name = str(record.name or "root")
        ours = name.startswith(PROJECT) or name in ("root", "py.warnings")
        source = "" if ours else f" ({name.split('.')[0]})"
        return f"{self.prefix}{record.levelname.lower()}{source}: {message}"


class _LibraryWarnings(logging.Filter):
    """The console's gate for libraries: their warnings stay in training.log (counted in ``hidden``), but for
    those we say in our words (``LIBRARY_MESSAGES``), shown once; errors always pass."""

    hidden = 0  # library warnings kept off the console in this process

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if _state["verbose"] or record.levelno < logging.WARNING or record.levelno >= logging.ERROR:
            return True
        if record.name.startswith(PROJECT) or (record.name == "py.warnings" and not _from_installed(record)):
            return True
        message = record.getMessage()
        ours = next((words for start, words in LIBRARY_MESSAGES.items() if start in message), None)
        if ours is None or (record.name, ours) in self.seen:
            type(self).hidden += 1
            return False
        self.seen.add((record.name, ours))
        record.console_text = ours  # training.log keeps the library's words
        return True


def _from_installed(record: logging.LogRecord) -> bool:
    """Whether a captured Python warning was raised inside an installed package (its text names the file)."""
    return any(folder in record.getMessage().split(":", 1)[0] for folder in _SITE)


def library_warnings_hidden() -> int:
    """How many library warnings this process kept off the console (they are in training.log)."""
    return _LibraryWarnings.hidden


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
