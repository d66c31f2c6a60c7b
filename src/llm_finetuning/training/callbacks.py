"""Trainer callbacks shared by both phases: metrics to JSONL, the progress view, graceful stop on signals,
periodic evaluation.

A failure inside a logging or evaluation callback is logged and swallowed: losing a metric must never kill
hours of training. Every callback runs on every rank of a multi-process run; ``MetricsWriter`` writes only on
the main process, and the stop decision is taken by all ranks together, so they stop after the same step.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from transformers import TrainerCallback

from ..reporting.progress import ProgressView, metrics_figures
from ..reporting.run_outputs import MetricsWriter
from ..runtime.distributed import any_rank
from ..runtime.logging_setup import libraries_verbose

logger = logging.getLogger(__name__)


def _never_raise(method: Callable) -> Callable:
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception:  # a broken metric or eval must not stop training
            logger.exception("%s.%s failed; training continues", type(self).__name__, method.__name__)
            return None

    wrapper.__name__ = method.__name__
    return wrapper


class MetricsLogging(TrainerCallback):
    """Every trainer log (loss, rewards, frac_reward_zero_std, clip ratios, lengths) into metrics.jsonl."""

    def __init__(self, writer: MetricsWriter, phase: str) -> None:
        self.writer, self.phase = writer, phase

    @_never_raise
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            self.writer.write(self.phase, state.global_step, logs)


class TrainingProgress(TrainerCallback):
    """The phase's progress view (``reporting/progress.py``) from the first step to the last, and, in place of the log
    dicts the trainer prints, a compact metrics line every ``logging_steps`` (the dicts still reach
    metrics.jsonl and the trackers). ``answer_rewards``: name -> weight of the rewards scoring the answer."""

    def __init__(self, title: str, phase: str, answer_rewards: Mapping[str, float] | None = None) -> None:
        self.title, self.phase = title, phase
        self.context: dict[str, Any] = {"answer_rewards": dict(answer_rewards or {})}
        self.view: ProgressView | None = None
        self._tokens: tuple[float, float] | None = None  # (time, tokens seen) at the last log
        self._final: dict[str, Any] = {}

    @staticmethod
    def take_over(trainer: Any) -> None:
        """Remove the trainer's own progress bar and log printer (``--verbose`` keeps them)."""
        from transformers.trainer import DEFAULT_PROGRESS_CALLBACK
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        if not libraries_verbose():
            for printer in (DEFAULT_PROGRESS_CALLBACK, ProgressCallback, PrinterCallback):
                trainer.remove_callback(printer)

    @_never_raise
    def on_train_begin(self, args, state, control, **kwargs):
        resumed = f", resuming after step {state.global_step}" if state.global_step else ""
        logger.info("%s: %d steps%s", self.title, state.max_steps, resumed)
        self.view = ProgressView(self.title, state.max_steps, initial=state.global_step,
                                 bar=not libraries_verbose())  # --verbose: the trainer's own bar shows it
        self._tokens = (time.monotonic(), 0.0) if state.global_step == 0 else None

    @_never_raise
    def on_step_end(self, args, state, control, **kwargs):
        if self.view is not None:
            self.view.advance_to(state.global_step)

    @_never_raise
    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or self.view is None:
            return
        if "train_runtime" in logs:  # the trainer's closing summary: said when the phase ends
            self._final = dict(logs)
            return
        self.context["tokens_per_second"] = self._tokens_per_second(logs.get("num_tokens"))
        bar, line = metrics_figures(self.phase, logs, self.context)
        self.view.show(bar)
        logger.info("%s %s: %s", self.title, self.view.position(), line)

    @_never_raise
    def on_train_end(self, args, state, control, **kwargs):
        if self.view is None:
            return
        spent = ProgressView.interval(self.view.elapsed())
        loss = self._final.get("train_loss")
        if state.global_step >= state.max_steps:
            logger.info("%s: %d steps in %s%s", self.title, state.global_step, spent,
                        "" if loss is None else f" (train loss {loss:.4g})")  # fmt: skip
        else:
            logger.info("%s: stopped after step %d of %d (%s)", self.title, state.global_step, state.max_steps,
                        spent)  # fmt: skip
        self.close()

    def close(self) -> None:
        if self.view is not None:
            self.view.close()
            self.view = None

    def _tokens_per_second(self, tokens: float | None) -> float | None:
        now, last = time.monotonic(), self._tokens
        self._tokens = None if tokens is None else (now, float(tokens))
        if tokens is None or last is None or now <= last[0]:
            return None
        return (float(tokens) - last[1]) / (now - last[0])


class GracefulStop(TrainerCallback):
    """On SIGINT/SIGTERM: finish the current step, save a checkpoint, stop; the phase then reports it.

    In a multi-process run the ranks decide together at the end of every step (``any_rank``): a signal that
    reached one rank, or reached the ranks during different steps, stops all of them after the same step, so
    the checkpoint is one complete checkpoint. One Ctrl-C can reach a rank twice (from the terminal, and
    forwarded by the launcher); a second signal counts as "really stop now" only after ``INSIST_AFTER`` seconds.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    INSIST_AFTER = 1.0

    def __init__(self) -> None:
        self.received: int | None = None
        self._received_at = 0.0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            if time.monotonic() - self._received_at > self.INSIST_AFTER:  # a second signal: the user insists
                raise KeyboardInterrupt
            return
        self.received, self._received_at = signum, time.monotonic()
        logger.warning("%s received: saving a checkpoint after this step", signal.Signals(signum).name)

    def on_step_end(self, args, state, control, **kwargs):
        if any_rank(self.received is not None):
            if self.received is None:
                self.received = signal.SIGTERM  # another rank was signalled: stop with it
            control.should_save = True
            control.should_training_stop = True
        return control


class PeriodicEvaluation(TrainerCallback):
    """Runs ``evaluate(model, step)`` every ``every`` steps (greedy, on the validation problems).

    ``model_context()`` yields the model to generate from (the phase's: under ZeRO-3 its gathered weights).
    """

    def __init__(self, every: int, evaluate: Callable[[Any, int], None],
                 model_context: Callable[[], contextlib.AbstractContextManager[Any]] | None = None) -> None:
        self.every, self.evaluate, self.model_context = every, evaluate, model_context

    @_never_raise
    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0 and state.global_step < state.max_steps:
            with (self.model_context() if self.model_context else contextlib.nullcontext(model)) as current:
                self.evaluate(current, state.global_step)
