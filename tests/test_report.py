"""report.html: the table, the plot, the sample answers per stage and the settings with their reasons, every
model text escaped, written atomically, and rendered by a real browser (headless Chromium, where installed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llm_finetuning.reporting.plots import plot_training
from llm_finetuning.reporting.report import render_report, write_report

HOSTILE = '<script>alert("x")</script></pre><b>bold</b> & 1 < 2'


def _sample(index: int, completion: str, correct: bool) -> dict:
    return {
        "index": index,
        "question": f"What is {index} + 4? {HOSTILE}",
        "gold": str(index + 4),
        "completion": completion,
        "answer": str(index + 4) if correct else None,
        "correct": correct,
        "formatted": correct,
        "num_tokens": 12,
        "total_reward": 9.5 if correct else -6.5,
        "rewards": {
            "match_format_exactly": 3.0 if correct else 0.0,
            "check_answer": 5.0 if correct else -2.0,
        },
    }


def _figures(accuracy: float) -> dict:
    return {
        "n": 24,
        "format_accuracy": accuracy,
        "answer_accuracy": accuracy / 2,
        "sampled_answer_accuracy": None,
        "reasoning_present": accuracy,
        "avg_reasoning_length": 21.6,
        "avg_total_reward": 2.4583,
    }


SUMMARY = {
    "eval": {"before_sft": _figures(0.0), "after_sft": _figures(1.0), "after_grpo": _figures(1.0)},
    "samples": {
        "before_sft": [_sample(0, HOSTILE, False), _sample(1, "", False)],
        "after_sft": [_sample(0, "9+2=11<SOLUTION>4</SOLUTION>", True), _sample(1, "x", False)],
        "after_grpo": None,  # a run stopped during GRPO
    },
    "phases": {"sft": {"steps": 120, "seconds": 18.5, "settings": {"learning_rate": 0.001, "bf16": False}},
               "grpo": {"steps": 4, "seconds": 2.4, "resumed_from": "grpo/checkpoint-2",
                        "settings": {"loss_type": "dapo", "reward_weights": [1.0, 1.0]}}},
    "save_path": None,
    "backend": "hf", "backend_reason": "model.backend: hf was asked for",
    "importance_sampling": {"correction": False, "engine_logprobs": None, "reason": "GRPO generates with generate"},
    "processes": {"num_processes": 2, "launcher": "accelerate", "zero_stage": None},
    "device": "cpu (x86_64)",
    "engine": "hf", "engine_reason": "auto: on a CPU vLLM is opt-in",
    "precision": "bf16", "precision_reason": "the GPU supports bfloat16",  # an entry added later, in either shape
    "optimizer": {"name": "adamw_8bit", "reason": "bitsandbytes is installed"},
    "versions": {"torch": "2.13.0", "trl": "1.15.0"},
    "seconds_total": 37.5,
    "complete": False,
}  # fmt: skip


@pytest.fixture
def plot_png(tmp_path) -> bytes:
    metrics = tmp_path / "metrics.jsonl"
    records = [{"phase": "sft", "step": s, "loss": 3.0 / s} for s in (1, 2, 3)]
    records += [{"phase": "eval", "step": s, "stage": f"grpo_step_{s}", "format_accuracy": 0.5, "answer_accuracy": 0.2}
                for s in (0, 2)]  # fmt: skip
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    return plot_training(metrics, tmp_path / "plots" / "training.png").read_bytes()


def test_model_and_data_text_is_escaped_everywhere():
    page = render_report(SUMMARY, title="<run>", plot_png=None)
    assert "<script>" not in page and "<b>bold</b>" not in page and "<run>" not in page
    assert (
        page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;/pre&gt;") >= 3
    )  # completion, questions
    assert "Run report: &lt;run&gt;" in page


def test_the_page_holds_the_table_the_samples_per_stage_and_the_plot(plot_png):
    page = render_report(SUMMARY, title="outputs/tiny", plot_png=plot_png)
    assert re.search(
        r"<th>format accuracy</th><td class=\"num\">0\.000</td><td class=\"num\">1\.000</td>", page
    )
    assert 'answer accuracy (sampled)</th><td class="num">-</td>' in page  # no sampled figure recorded
    assert page.count('<div class="problem">') == 2  # one card per problem, its stages side by side
    assert (
        "Problem 0" in page
        and "gold answer: <b>4</b>" in page
        and "9+2=11&lt;SOLUTION&gt;4&lt;/SOLUTION&gt;" in page
    )
    assert page.count("<th>before SFT</th><td><pre>") == 2 and page.count("<th>after SFT</th><td><pre>") == 2
    assert "<th>after GRPO</th><td><pre>" not in page  # the stopped run has no after-GRPO answers
    assert 'src="data:image/png;base64,' in page
    assert "stopped before the end" in page


def test_every_choice_with_a_reason_is_shown_with_it_whatever_its_shape():
    page = render_report(SUMMARY, title="run", plot_png=None)
    rows = {name: (what, why) for name, what, why in
            re.findall(r"<tr><th>([^<]+)</th><td>([^<]*)</td><td class=\"why\">([^<]*)</td></tr>", page)}  # fmt: skip
    assert rows["backend"] == ("hf", "model.backend: hf was asked for")
    assert rows["engine"] == ("hf", "auto: on a CPU vLLM is opt-in")
    assert rows["precision"] == ("bf16", "the GPU supports bfloat16")
    assert rows["optimizer"] == ("name: adamw_8bit", "bitsandbytes is installed")
    assert rows["importance sampling"] == (
        "correction: no; engine logprobs: none",
        "GRPO generates with generate",
    )
    assert rows["processes"] == ("num processes: 2; launcher: accelerate; zero stage: none", "")
    assert "backend reason" not in rows
    assert "<th>loss_type</th><td>dapo</td>" in page and "<th>reward_weights</th><td>1, 1</td>" in page
    assert "resumed from grpo/checkpoint-2" in page and '<th>the rest</th><td class="num">00:16</td>' in page


def test_write_report_replaces_the_page_atomically(tmp_path, plot_png):
    (tmp_path / "plots").mkdir(exist_ok=True)
    (tmp_path / "plots" / "training.png").write_bytes(plot_png)
    (tmp_path / "report.html").write_text("old")
    path = write_report(tmp_path, SUMMARY)
    assert path == tmp_path / "report.html" and path.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl", "plots", "report.html"]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless as root on a machine without a network: no sandbox, no GPU, none of the background connections.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install chromium)"
)
def test_a_browser_renders_the_page(tmp_path, plot_png):
    import numpy as np
    from matplotlib.image import imread

    (tmp_path / "plots").mkdir(exist_ok=True)
    (tmp_path / "plots" / "training.png").write_bytes(plot_png)
    page = write_report(tmp_path, {**SUMMARY, "complete": True}).as_uri()
    dom = _chromium(tmp_path / "profile", "--dump-dom", page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "What the model writes" in dom.stdout and "<script>alert" not in dom.stdout
    assert dom.stdout.count("<img") == 1 and 'class="status complete"' in dom.stdout
    shot = tmp_path / "report.png"
    render = _chromium(tmp_path / "profile", "--window-size=1200,3000", f"--screenshot={shot}", page)
    assert render.returncode == 0 and shot.is_file(), render.stderr[-2000:]
    pixels = imread(shot)
    assert pixels.shape[:2] == (3000, 1200)
    assert np.std(pixels[:1500]) > 0.05  # text, tables and the plot, not a blank page
