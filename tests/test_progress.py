"""The console a person watches: the progress view, the metrics lines, the sample answers, quiet libraries.

What a whole run prints, through a terminal and through a pipe, is in ``test_console_e2e.py``.
"""

from __future__ import annotations

import io
import logging
import os
from types import SimpleNamespace

import pytest

from llm_finetuning.reporting import progress
from llm_finetuning.reporting.progress import ProgressView, metrics_figures, sample_text, shorten
from llm_finetuning.runtime import logging_setup
from llm_finetuning.runtime.logging_setup import ConsoleFormatter, quiet_libraries, setup_logging
from llm_finetuning.training.callbacks import TrainingProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def stream(monkeypatch):
    """The console's stream, replaced by ``stream(terminal=...)``."""

    def use(terminal: bool) -> io.StringIO:
        target = Terminal() if terminal else io.StringIO()
        monkeypatch.setattr(progress, "console_stream", lambda: target)
        return target

    return use


@pytest.mark.parametrize(("text", "width", "expected"), [
    ("What is 3 + 4?", 40, "What is 3 + 4?"),
    ("line one\n\n  line   two", 40, "line one line two"),
    ("a" * 30 + "<SOLUTION>7</SOLUTION>", 30, "a" * 12 + " ... " + "SOLUTION>7</SOLUTION>"[-13:]),
])  # fmt: skip
def test_shorten_keeps_the_start_and_the_end_on_one_line(text, width, expected):
    assert shorten(text, width) == expected
    assert len(shorten(text, width)) <= width


SAMPLE = {"index": 4, "question": "Mia has 69 coins. She buys 82 more.", "gold": "151",
          "completion": "9+2=11\n6+8+1=15<end_working_out><SOLUTION>151</SOLUTION>", "answer": "151",
          "correct": True, "formatted": True, "num_tokens": 20, "total_reward": 9.5,
          "rewards": {"match_format_exactly": 3.0, "check_answer": 5.0, "check_numbers": 1.5}}  # fmt: skip


def test_a_sample_answer_shows_question_completion_answer_gold_and_rewards():
    lines = sample_text(SAMPLE).splitlines()
    assert lines == [
        "  problem 4: Mia has 69 coins. She buys 82 more.",
        "    wrote:  9+2=11 6+8+1=15<end_working_out><SOLUTION>151</SOLUTION>",
        "    answer: 151 (gold 151): right",
        "    reward: 9.50 (match_format_exactly 3.00, check_answer 5.00, check_numbers 1.50)",
    ]
    wrong = sample_text({**SAMPLE, "answer": None, "correct": False, "completion": ""})
    assert "answer: (none) (gold 151): wrong" in wrong and "wrote:  (nothing)" in wrong


GRPO_LOG = {"loss": 0.01, "reward": 2.75, "reward_std": 1.9, "frac_reward_zero_std": 0.375,
            "completions/mean_length": 28.78, "step_time": 0.333, "rewards/match_format_exactly/mean": 3.0,
            "rewards/check_answer/mean": -0.25, "rewards/check_numbers/mean": -1.5}  # fmt: skip


def test_grpo_figures_show_the_reward_its_answer_part_zero_std_length_and_step_time():
    answer_weights = {"check_answer": 1.0, "check_numbers": 0.5}
    bar, line = metrics_figures("grpo", GRPO_LOG, {"answer_rewards": answer_weights})
    assert bar == "reward 2.75, answer -1.00, zero-std 0.38, len 28.8, 0.33s/step"
    assert line == (
        "reward 2.75, answer part -1.00, zero-std groups 0.38, completion 28.8 tokens, 0.33 s/step; "
        "rewards: match_format_exactly 3.00, check_answer -0.25, check_numbers -1.50"
    )


def test_grpo_figures_show_the_share_right_and_the_groups_with_signal_where_the_run_counts_them():
    logs = {**GRPO_LOG, "groups/correct": 0.41, "groups/signal": 0.625}
    bar, line = metrics_figures("grpo", logs, {"answer_rewards": {"check_answer": 1.0}})
    assert bar == "reward 2.75, answer -0.25, right 0.41, signal 0.62, len 28.8, 0.33s/step"
    assert line.startswith("reward 2.75, answer part -0.25, right 0.41, groups with signal 0.62, completion 28.8")


def test_sft_figures_show_loss_token_accuracy_and_tokens_per_second():
    logs = {"loss": 1.16436, "mean_token_accuracy": 0.6809, "num_tokens": 77952.0, "grad_norm": 1.67}
    assert metrics_figures("sft", logs, {"tokens_per_second": 8613.8}) == (
        "loss 1.164, 8,614 tok/s",
        "loss 1.164, token accuracy 0.681, 8,614 tokens/s",
    )
    assert metrics_figures("sft", logs, {})[0] == "loss 1.164"  # no rate before the second log


def test_a_view_draws_one_bar_on_a_terminal_and_nothing_elsewhere(stream):
    terminal = stream(terminal=True)
    with ProgressView("SFT", 4) as view:
        view.advance_to(2)
        view.show("loss 1.000")
    assert "SFT:  50%" in terminal.getvalue() and "loss 1.000" in terminal.getvalue()
    piped = stream(terminal=False)
    with ProgressView("SFT", 4) as view:
        view.advance_to(4)
    assert piped.getvalue() == ""
    assert view.position().startswith("4/4, ")


def test_a_view_on_another_rank_is_silent(stream, monkeypatch):
    terminal = stream(terminal=True)
    monkeypatch.setattr(progress, "is_main_process", lambda: False)
    with ProgressView("GRPO", 4) as view:
        view.advance(3)
    assert terminal.getvalue() == ""


def test_an_evaluation_inside_a_phase_leaves_its_result_beside_the_phase_bar(stream):
    terminal = stream(terminal=True)
    with ProgressView("GRPO", 10) as phase:
        with ProgressView("eval grpo_step_5", 24, unit="completion") as evaluation:
            evaluation.advance(24)
            evaluation.close(result="answer 0.620")
        phase.advance(6)
    assert phase.last_inner == "eval grpo_step_5: answer 0.620"
    assert "eval grpo_step_5: answer 0.620" in terminal.getvalue()


def _state(step: int, max_steps: int = 20) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, max_steps=max_steps)


def test_training_progress_says_start_metrics_every_log_and_end(stream, caplog):
    stream(terminal=False)
    callback = TrainingProgress("SFT", "sft")
    with caplog.at_level(logging.INFO, logger="llm_finetuning.training.callbacks"):
        callback.on_train_begin(None, _state(0), None)
        callback.on_step_end(None, _state(10), None)
        callback.on_log(
            None, _state(10), None, logs={"loss": 2.5, "mean_token_accuracy": 0.5, "num_tokens": 100.0}
        )
        callback.on_step_end(None, _state(20), None)
        callback.on_log(None, _state(20), None, logs={"train_runtime": 3.0, "train_loss": 1.631})
        callback.on_train_end(None, _state(20), None)
    messages = caplog.messages
    assert messages[0] == "SFT: 20 steps"
    assert messages[1].startswith("SFT 10/20, ") and "left: loss 2.500, token accuracy 0.500" in messages[1]
    assert messages[2].startswith("SFT: 20 steps in ") and messages[2].endswith("(train loss 1.631)")
    assert len(messages) == 3  # the trainer's closing summary is said once, at the end


def test_training_progress_on_resume_counts_from_the_checkpoint_and_says_a_stop(stream, caplog):
    stream(terminal=False)
    callback = TrainingProgress("GRPO", "grpo")
    with caplog.at_level(logging.INFO, logger="llm_finetuning.training.callbacks"):
        callback.on_train_begin(None, _state(8), None)
        callback.on_step_end(None, _state(9), None)
        callback.on_train_end(None, _state(9), None)
    assert caplog.messages[0] == "GRPO: 20 steps, resuming after step 8"
    assert caplog.messages[1].startswith("GRPO: stopped after step 9 of 20")


class FakeTrainer:
    def __init__(self) -> None:
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        self.callbacks = [ProgressCallback(), PrinterCallback(), object()]

    def remove_callback(self, kind: type) -> None:
        self.callbacks = [c for c in self.callbacks if not isinstance(c, kind)]


@pytest.mark.parametrize(("verbose", "kept"), [(False, 1), (True, 3)])
def test_the_trainers_own_bar_and_log_printer_give_way_unless_verbose(verbose, kept):
    trainer = FakeTrainer()
    try:
        setup_logging("INFO", verbose=verbose)
        TrainingProgress.take_over(trainer)
    finally:
        setup_logging("INFO")
    assert len(trainer.callbacks) == kept


def _record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


@pytest.mark.parametrize(("name", "level", "message", "shown"), [
    ("llm_finetuning.pipeline", logging.INFO, "SFT: 20 steps", "SFT: 20 steps"),
    ("llm_finetuning.training.phase", logging.WARNING, "sft: starting over", "warning: sft: starting over"),
    ("transformers.trainer", logging.WARNING, "a library warning", "warning (transformers): a library warning"),
    ("py.warnings", logging.WARNING, "x.py:1: UserWarning: careful", "warning: x.py:1: UserWarning: careful"),
])  # fmt: skip
def test_the_console_shows_our_lines_bare_and_names_a_librarys_warning(name, level, message, shown):
    assert ConsoleFormatter().format(_record(name, level, message)) == shown
    assert ConsoleFormatter("[rank 1] ").format(_record(name, level, message)) == "[rank 1] " + shown


def test_a_library_warning_stays_in_training_log_unless_we_say_it_in_our_words(monkeypatch):
    monkeypatch.setitem(
        logging_setup.LIBRARY_MESSAGES, "tokenizer has no pad token", "the tokenizer pads with eos"
    )
    console = logging_setup._LibraryWarnings()
    hidden = logging_setup.library_warnings_hidden()
    assert not console.filter(_record("transformers.trainer", logging.WARNING, "some warning"))  # training.log only
    assert not console.filter(_record("vllm.model_executor", logging.WARNING, "RMSNorm: Failed to load weights"))
    assert logging_setup.library_warnings_hidden() == hidden + 2  # counted, said at the end of the run
    assert console.filter(_record("transformers.trainer", logging.ERROR, "a library error"))  # errors always pass
    assert not console.filter(
        _record(
            "transformers.trainer_utils",
            logging.WARNING,
            "mtime may not be reliable on this filesystem, falling back",
        )
    )  # training.log only
    reworded = _record("transformers.x", logging.WARNING, "the tokenizer has no pad token; using eos")
    assert console.filter(reworded) and ConsoleFormatter().format(reworded) == (
        "warning (transformers): the tokenizer pads with eos"
    )
    assert not console.filter(_record("transformers.x", logging.WARNING, "the tokenizer has no pad token; again"))
    assert reworded.getMessage() == "the tokenizer has no pad token; using eos"  # training.log keeps theirs
    ours = _record("llm_finetuning.pipeline", logging.WARNING, "twice")
    assert console.filter(ours) and console.filter(ours)  # our own warnings are ours to repeat
    installed = _record("py.warnings", logging.WARNING, "/x/site-packages/vllm/a.py:1: FutureWarning: deprecated")
    mine = _record("py.warnings", logging.WARNING, "train.py:1: UserWarning: careful")
    assert not console.filter(installed) and console.filter(mine)


def test_quiet_libraries_turns_their_bars_off_and_routes_their_records_through_ours():
    import datasets
    import huggingface_hub
    import transformers

    try:
        setup_logging("INFO")
        quiet_libraries()
        assert not transformers.utils.logging.is_progress_bar_enabled()
        assert datasets.is_progress_bar_enabled() is False
        assert huggingface_hub.utils.are_progress_bars_disabled()
        library = logging.getLogger("transformers")  # its own stderr handler gone, its records reach ours
        assert library.propagate and not any(type(h) is logging.StreamHandler for h in library.handlers)
        assert os.environ["VLLM_LOGGING_LEVEL"] == "WARNING"  # read when vLLM is imported, at an engine's start
        assert logging.getLogger("vllm").level == logging.WARNING
        setup_logging("INFO", verbose=True)
        quiet_libraries(main=False)  # another rank: still no bars
        assert not transformers.utils.logging.is_progress_bar_enabled()
        quiet_libraries()
        assert transformers.utils.logging.is_progress_bar_enabled() and datasets.is_progress_bar_enabled()
        assert os.environ["VLLM_LOGGING_LEVEL"] == "INFO"
    finally:
        setup_logging("INFO")
        quiet_libraries()
