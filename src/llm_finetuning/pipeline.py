"""The whole run as one function: ``run(config, options) -> summary``, the programmatic API behind the CLI.

    >>> from llm_finetuning.config import PipelineConfig
    >>> from llm_finetuning.pipeline import RunOptions, run
    >>> summary = run(PipelineConfig.from_yaml("configs/tiny.yaml"), RunOptions())   # doctest: +SKIP

The story of a run:
 0. prepare the output dir, logging and the resolved config; choose the backend (unsloth first, if chosen);
 1. load the model (the tiny demo model trains its tokenizer on the demo's text), then the GRPO data and
    its held-out problems, which every evaluation uses;
 2. evaluate the untouched model (only when SFT runs now and ``evaluation.eval_before_sft`` is on);
 3. SFT (or continue from ``sft/final``), save ``sft/final``, drop the trainer and free memory;
 4. evaluate again (= GRPO step 0);
 5. GRPO with periodic evaluation, save the final adapter to ``save_path``;
 6. evaluate a last time; write ``summary.json`` and the plot, print the before/after table.
Finished phases are recorded in ``run_state.json`` so ``--resume`` skips them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import PipelineConfig
from .errors import TrainingInterrupted
from .logging_setup import setup_logging
from .run_outputs import RunRecorder

logger = logging.getLogger(__name__)


@dataclass
class RunOptions:
    """What the command line says beyond the config."""

    skip_sft: bool = False  # continue from <output_dir>/sft/final (or the base model)
    skip_grpo: bool = False  # stop after SFT
    resume: bool = False  # continue unfinished phases from their newest complete checkpoint


def run(config: PipelineConfig, options: RunOptions | None = None) -> dict[str, Any]:
    """Run the pipeline; return the summary (also written to ``<output_dir>/summary.json``)."""
    options = options or RunOptions()
    started = time.perf_counter()
    output_dir = Path(config.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    setup_logging(config.log_level, output_dir)
    (output_dir / "config.yaml").write_text(config.to_yaml())
    recorder = RunRecorder(output_dir, resume=options.resume)
    session = _session(config, recorder)  # heavy imports happen here, after the backend is chosen
    try:
        session.run(options)
    except TrainingInterrupted:
        recorder.finish(time.perf_counter() - started, complete=False)
        raise
    summary = recorder.finish(time.perf_counter() - started, complete=True)
    recorder.print_table()
    return summary


def _session(config: PipelineConfig, recorder: RunRecorder) -> Any:
    # The model package decides the backend without importing unsloth on CPU; when unsloth is chosen it must
    # be imported before trl/transformers, which the session module pulls in.
    from .model import choose_backend, import_unsloth

    backend, _ = choose_backend(config.model)
    if backend == "unsloth":
        import_unsloth()
    from .session import RunSession

    return RunSession(config, recorder)
