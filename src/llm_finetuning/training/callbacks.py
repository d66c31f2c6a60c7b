"""Trainer callbacks shared by both phases: metrics to JSONL, graceful stop on signals, periodic evaluation.

A failure inside a logging or evaluation callback is logged and swallowed: losing a metric must never kill
hours of training.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from ..run_outputs import MetricsWriter

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


class GracefulStop(TrainerCallback):
    """On SIGINT/SIGTERM: finish the current step, save a checkpoint, stop; the phase then reports it."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        if self.received is not None:  # a second signal: the user really wants out
            raise KeyboardInterrupt
        self.received = signum
        logger.warning("%s received: saving a checkpoint after this step", signal.Signals(signum).name)

    def on_step_end(self, args, state, control, **kwargs):
        if self.received is not None:
            control.should_save = True
            control.should_training_stop = True
        return control


class PeriodicEvaluation(TrainerCallback):
    """Runs ``evaluate(model, step)`` every ``every`` steps (greedy, on the validation problems)."""

    def __init__(self, every: int, evaluate: Callable[[Any, int], None]) -> None:
        self.every, self.evaluate = every, evaluate

    @_never_raise
    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0 and state.global_step < state.max_steps:
            self.evaluate(model, state.global_step)
