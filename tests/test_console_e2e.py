"""What a person sees when a tiny run goes through ``run_training.py``: on a terminal (a pseudo-terminal) and
through a pipe, no library progress bars and no raw trainer dicts, one bar per phase on the terminal and none
in the pipe, a metrics line every ``logging_steps``, the sample answers at each evaluation and the final table;
with ``--verbose`` the libraries' own output is back.

The three runs go side by side (one thread each), on a schedule cut to what the console needs, not to learning.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from conftest import ROOT, TEST_SCHEDULE, TINY_YAML, launch_env

pytestmark = pytest.mark.slow

CONSOLE_SCHEDULE = [*TEST_SCHEDULE, "sft_training.max_steps=20", "sft_training.logging_steps=10",
                    "sft_training.save_steps=20", "grpo_training.logging_steps=2"]  # fmt: skip
EVALUATIONS = ("before_sft", "after_sft", "grpo_step_2", "after_grpo")
OUR_BARS = {"SFT", "GRPO", *(f"eval {stage}" for stage in EVALUATIONS)}
LIBRARY_NOISE = ("Writing model shards", "Loading weights", "tokenize", "Tokenizing", "Map", "examples/s",
                 "'loss':", "'grad_norm'", "{'train_runtime'", "[transformers]")  # fmt: skip
BAR_FRAME = re.compile(r"^([\w ]+): +\d+%\|")  # a tqdm frame: "<title>:  50%|"
ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the cursor moves of a second, nested bar


def _segments(text: str) -> list[str]:
    """Everything written between carriage returns and newlines, cursor moves removed."""
    return re.split(r"[\r\n]", ESCAPES.sub("", text))


def _lines(text: str) -> list[str]:
    """The lines a terminal keeps: what each line ends with, without the bars drawn over it."""
    kept = [ESCAPES.sub("", line.rstrip("\r")).rsplit("\r", 1)[-1] for line in text.split("\n")]
    return [line for line in kept if line.strip() and not BAR_FRAME.match(line)]


def _command(output_dir: Path, *extra: str) -> list[str]:
    sets = [arg for item in CONSOLE_SCHEDULE for arg in ("--set", item)]
    return [sys.executable, str(ROOT / "run_training.py"), "--config", str(TINY_YAML), "--output-dir",
            str(output_dir), *sets, *extra]  # fmt: skip


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal 120 columns wide: (our end, the run's end)."""
    ours, theirs = pty.openpty()
    fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    return ours, theirs


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the run closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def consoles(tmp_path_factory) -> dict[str, str]:
    """The console of one tiny run in a terminal, one through a pipe, and one --verbose (SFT only) pipe."""
    root = tmp_path_factory.mktemp("console")
    env = launch_env()
    ours, theirs = _terminal()
    in_terminal = subprocess.Popen(_command(root / "terminal"), cwd=ROOT, env=env, stdin=theirs, stdout=theirs,
                                   stderr=theirs, close_fds=True)  # fmt: skip
    os.close(theirs)
    piped = subprocess.Popen(_command(root / "pipe"), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)  # fmt: skip
    verbose = subprocess.Popen(_command(root / "verbose", "--skip-grpo", "--verbose"), cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    terminal_text = _read_all(ours)
    pipe_text, _ = piped.communicate(timeout=600)
    verbose_text, _ = verbose.communicate(timeout=600)
    assert in_terminal.wait(timeout=60) == 0, terminal_text[-3000:]
    assert piped.returncode == 0, pipe_text[-3000:]
    assert verbose.returncode == 0, verbose_text[-3000:]
    return {
        "terminal": terminal_text,
        "pipe": pipe_text,
        "verbose": verbose_text,
        "pipe_dir": str(root / "pipe"),
    }


@pytest.mark.parametrize("mode", ["terminal", "pipe"])
def test_no_library_bars_and_no_raw_trainer_dicts(consoles, mode):
    text = consoles[mode]
    for noise in LIBRARY_NOISE:
        assert noise not in text, noise
    assert "Traceback" not in text


def test_the_terminal_shows_one_bar_per_phase_and_no_other(consoles):
    frames = {
        match.group(1) for segment in _segments(consoles["terminal"]) if (match := BAR_FRAME.match(segment))
    }
    assert frames == OUR_BARS


def test_the_pipe_shows_no_bar_but_a_line_per_logging_step(consoles):
    text = consoles["pipe"]
    assert "\r" not in text and not any(BAR_FRAME.match(line) for line in text.splitlines())
    lines = text.splitlines()
    assert [line.split(",")[0] for line in lines if re.match(r"(SFT|GRPO) \d+/", line)] == [
        "SFT 10/20",
        "SFT 20/20",
        "GRPO 2/4",
        "GRPO 4/4",
    ]
    assert "SFT: 20 steps" in lines and any(line.startswith("SFT: 20 steps in ") for line in lines)
    grpo = next(line for line in lines if line.startswith("GRPO 2/4"))
    assert (
        "left: reward " in grpo
        and "groups with signal" in grpo
        and "s/step; rewards: match_format_exactly" in grpo
    )


@pytest.mark.parametrize("mode", ["terminal", "pipe"])
def test_every_evaluation_shows_the_same_problems_answers_and_the_run_ends_with_the_table(consoles, mode):
    lines = _lines(consoles[mode])
    said = [line.split(":")[0] for line in lines if line.startswith("eval ")]
    assert said == [f"eval {stage}" for stage in EVALUATIONS]
    for stage in EVALUATIONS:
        start = lines.index(next(line for line in lines if line.startswith(f"eval {stage}:")))
        block = lines[start + 1 : start + 13]
        assert [line.split(":")[0].strip() for line in block] == [
            "problem 0",
            "wrote",
            "answer",
            "reward",
            "problem 1",
            "wrote",
            "answer",
            "reward",
            "problem 2",
            "wrote",
            "answer",
            "reward",
        ]
        assert "(gold " in block[2]
    assert any(line.split() == ["before", "SFT", "after", "SFT", "after", "GRPO"] for line in lines)


def test_the_run_leaves_its_report(consoles):
    page = (Path(consoles["pipe_dir"]) / "report.html").read_text()
    assert "What the model writes" in page and "data:image/png;base64," in page


def test_verbose_brings_the_libraries_output_back(consoles):
    text = consoles["verbose"]
    assert "Writing model shards" in text and "Tokenizing train dataset" in text  # their bars
    assert "{'loss':" in text  # the trainer's own log lines
    assert "SFT 10/20" in text  # and ours beside them
