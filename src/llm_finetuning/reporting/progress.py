"""What a person watching a run sees: one progress view per phase, a compact metrics line, sample answers.

A run on a real model takes most of an hour; at a glance the console says which phase runs, step k of n, the
time spent and left, the phase's live figures (SFT: loss, tokens/s; GRPO: the reward and its answer part, the
share of groups whose rewards have zero std, completion length, step time), the last evaluation, and what
the model actually writes. Each phase — SFT, every evaluation, GRPO — has one ``ProgressView``:

- on a terminal, one tqdm bar with the live figures beside it. Log lines pass above it (the console handler
  of ``logging_setup`` writes through ``tqdm.write``), so nothing breaks the bar;
- anywhere else (CI, ``| tee``, a log file) no bar: the phase's start, a compact metrics line every
  ``logging_steps`` (with step, time spent and time left) and its end, as plain lines.

tqdm rather than rich: tqdm is already a dependency, the libraries whose bars ``--verbose`` brings back draw
with it too (one writer, one lock), ``tqdm.write`` lets log lines pass a live bar, and it turns itself off
where the output is not a terminal; rich's live display takes the stream over and garbles other writers.

Only the main process of a multi-process run shows anything: the other ranks' views are silent. Nothing here
changes what is computed: the views only read figures the trainers and evaluations already have.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from tqdm import tqdm

from ..runtime.distributed import is_main_process
from ..runtime.logging_setup import console_stream

__all__ = ["FIGURES", "ProgressView", "log_samples", "metrics_figures", "sample_text", "shorten"]

logger = logging.getLogger(__name__)

_open: list[ProgressView] = []  # the views now shown, outermost first (an evaluation inside GRPO)


class ProgressView:
    """One phase's progress: ``total`` units (steps, completions) from ``initial``; a bar on a terminal."""

    def __init__(
        self, title: str, total: int, *, unit: str = "step", initial: int = 0, bar: bool = True
    ) -> None:
        """``bar``: False where another bar shows the same progress (the trainer's own, under ``--verbose``)."""
        self.title, self.total, self.unit, self.initial = title, total, unit, initial
        self.done = initial
        self.started = time.monotonic()
        self.shown = is_main_process()
        self.figures = ""  # beside the bar
        self.last_inner = ""  # what the last view opened inside this one ended with (an evaluation's result)
        self.parent = _open[-1] if _open else None
        stream = console_stream()
        live = bar and self.shown and _is_terminal(stream)
        self.bar = tqdm(total=total, initial=initial, desc=title, unit=unit, file=stream, leave=False,
                        dynamic_ncols=True) if live else None  # fmt: skip
        _open.append(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def advance(self, count: int = 1) -> None:
        self.advance_to(self.done + count)

    def advance_to(self, done: int) -> None:
        if self.bar is not None and done > self.done:
            self.bar.update(done - self.done)
        self.done = done

    def show(self, figures: str) -> None:
        """The live figures beside the bar (a terminal only; elsewhere the metrics lines carry them)."""
        self.figures = figures
        self._refresh()

    def close(self, result: str = "") -> None:
        """Take the bar away; ``result`` (one short phrase) is shown beside the enclosing view's bar."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self in _open:
            _open.remove(self)
        if result and self.parent is not None:
            self.parent.last_inner = f"{self.title}: {result}"
            self.parent._refresh()

    def position(self) -> str:
        """``20/120, 0:03 spent, 0:14 left``: where the phase is, for a plain line."""
        elapsed = time.monotonic() - self.started
        text = f"{self.done}/{self.total}, {self.interval(elapsed)} spent"
        if self.done > self.initial and self.total > self.done:
            left = elapsed / (self.done - self.initial) * (self.total - self.done)
            text += f", {self.interval(left)} left"
        return text

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @staticmethod
    def interval(seconds: float) -> str:
        """``1:02:03``, ``4:05``: as the bars write times."""
        return tqdm.format_interval(seconds)

    def _refresh(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(" | ".join(part for part in (self.figures, self.last_inner) if part))


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


# What the views show of a trainer's logs, per phase: (bar figures, line figures). ``context`` carries what the
# logs lack: ``tokens_per_second`` (from the logged token count) and ``answer_rewards`` (name -> weight of the
# rewards that score the answer, whose weighted sum is the answer part of the reward).
Figures = Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[str, str]]


def _sft_figures(logs: Mapping[str, Any], context: Mapping[str, Any]) -> tuple[str, str]:
    rate = context.get("tokens_per_second")
    loss, accuracy = _fixed(logs.get("loss"), 3), _fixed(logs.get("mean_token_accuracy"), 3)
    bar = [f"loss {loss}"] + ([f"{rate:,.0f} tok/s"] if rate else [])
    line = [f"loss {loss}", f"token accuracy {accuracy}"] + ([f"{rate:,.0f} tokens/s"] if rate else [])
    return ", ".join(bar), ", ".join(line)


def _grpo_figures(logs: Mapping[str, Any], context: Mapping[str, Any]) -> tuple[str, str]:
    parts = {key.split("/")[1]: value for key, value in logs.items()
             if key.startswith("rewards/") and key.endswith("/mean")}  # fmt: skip
    weights = context.get("answer_rewards") or {}
    answer = sum(weights[name] * parts[name] for name in weights if name in parts) if weights else None
    reward, zero_std = _fixed(logs.get("reward")), _fixed(logs.get("frac_reward_zero_std"))
    length, step_time = _fixed(logs.get("completions/mean_length"), 1), _fixed(logs.get("step_time"))
    bar = [f"reward {reward}"] + ([f"answer {_fixed(answer)}"] if answer is not None else [])
    line = [f"reward {reward}"] + ([f"answer part {_fixed(answer)}"] if answer is not None else [])
    if "groups/signal" in logs:  # per group, whatever scale_rewards is (training/advantages.py)
        right, signal = _fixed(logs.get("groups/correct")), _fixed(logs["groups/signal"])
        bar += [f"right {right}", f"signal {signal}"]
        line += [f"right {right}", f"groups with signal {signal}"]
        if "groups/trained_signal" in logs:  # grpo_training.oversample: of the groups the step trained on
            line[-1] += f" ({_fixed(logs['groups/trained_signal'])} of those trained)"
    else:
        bar += [f"zero-std {zero_std}"]
        line += [f"zero-std groups {zero_std}"]
    bar += [f"len {length}", f"{step_time}s/step"]
    line += [f"completion {length} tokens", f"{step_time} s/step"]
    rewards = ", ".join(f"{name} {_fixed(value)}" for name, value in parts.items())
    return ", ".join(bar), ", ".join(line) + (f"; rewards: {rewards}" if rewards else "")


FIGURES: dict[str, Figures] = {"sft": _sft_figures, "grpo": _grpo_figures}


def metrics_figures(phase: str, logs: Mapping[str, Any], context: Mapping[str, Any]) -> tuple[str, str]:
    """``(bar figures, line figures)`` of one trainer log of ``phase`` (another phase: every number)."""
    if phase in FIGURES:
        return FIGURES[phase](logs, context)
    text = ", ".join(f"{key} {value:.4g}" for key, value in logs.items() if isinstance(value, (int, float)))
    return text, text


def _fixed(value: Any, decimals: int = 2) -> str:
    return f"{value:.{decimals}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def shorten(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters: its start and its end (where the answer is)."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    head = (width - 5) // 2
    return f"{flat[:head]} ... {flat[-(width - 5 - head) :]}"


def sample_text(sample: Mapping[str, Any], width: int = 110) -> str:
    """One sample answer as console lines: the question, what the model wrote, its answer, its rewards."""
    verdict = "right" if sample["correct"] else "wrong"
    rewards = ", ".join(f"{name} {_fixed(value)}" for name, value in sample["rewards"].items())
    answer = sample["answer"] if sample["answer"] is not None else "(none)"
    return "\n".join([
        f"  problem {sample['index']}: {shorten(sample['question'], width)}",
        f"    wrote:  {shorten(sample['completion'], width) or '(nothing)'}",
        f"    answer: {shorten(str(answer), 50)} (gold {shorten(sample['gold'], 50)}): {verdict}",
        f"    reward: {_fixed(sample['total_reward'])} ({rewards})",
    ])  # fmt: skip


def log_samples(samples: Sequence[Mapping[str, Any]]) -> None:
    """The sample answers on the console (shortened) and in training.log, one block each."""
    for sample in samples:
        logger.info(sample_text(sample))
