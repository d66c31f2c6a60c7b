"""Your own reward functions (rewards/plugin.py): by import path or file, checked when the config is built, run
in the sandbox, never raising into training, and driving GRPO end to end on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, SIMPLE_SUMS

from llm_finetuning.config import PipelineConfig
from llm_finetuning.rewards import build_rewards
from llm_finetuning.schema import ConfigError
from llm_finetuning.session.checks import check_config

EXAMPLE = ROOT / "docs" / "examples" / "my_rewards.py"


@pytest.fixture
def user_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "./file.py:function" is read from where the command runs
    (tmp_path / "mine.py").write_text(
        "def short(completions, limit=3, **kwargs):\n"
        "    texts = [c if isinstance(c, str) else c[-1]['content'] for c in completions]  # TRL: chat messages\n"
        "    return [1.0 if len(t.split()) <= limit else 0.0 for t in texts]\n"
        "def wrong_length(completions, **kwargs):\n"
        "    return [1.0]\n"
        "def writes(completions, **kwargs):\n"
        f"    open({str(tmp_path / 'written')!r}, 'w').write('x')\n"
        "    return [0.0] * len(completions)\n"
        "def slow(completions, **kwargs):\n"
        "    while True:\n"
        "        pass\n"
    )
    return tmp_path


def test_the_documented_example_scores_as_it_says():
    (brevity, mentions), _ = build_rewards([{"name": f"{EXAMPLE}:brevity", "params": {"target_words": 2}},
                                            {"name": f"{EXAMPLE}:mentions_answer"}])  # fmt: skip
    assert brevity(completions=["one two", "one two three four"]) == [0.0, -1.0]
    assert mentions(completions=["so 12", [{"role": "assistant", "content": "7"}]], answer=["12", "8"]) == [1.0, 0.0]
    assert (brevity.__name__, mentions.__name__) == ("brevity", "mentions_answer")


def test_a_file_reward_with_params_runs_in_the_sandbox(user_file):
    (short,), weights = build_rewards([{"name": "./mine.py:short", "weight": 0.5, "params": {"limit": 2}}])
    assert short(prompts=["q", "q"], completions=["a b", "a b c"], answer=["1", "2"]) == [1.0, 0.0]
    assert weights == [0.5] and short.sandbox


def test_a_reward_that_misbehaves_gives_no_score_and_never_raises(user_file):
    funcs, _ = build_rewards([{"name": "./mine.py:wrong_length"}, {"name": "./mine.py:writes"},
                              {"name": "./mine.py:slow", "params": {"timeout": 1}}])  # fmt: skip
    for reward in funcs:
        assert reward(completions=["a", "b"]) == [None, None]
    assert not (user_file / "written").exists()  # the sandbox refused the write


def test_a_bad_reward_name_is_a_one_line_config_error(user_file):
    for name, message in (("./mine.py:absent", "has no callable absent"), ("./nofile.py:f", "cannot import"),
                          ("no_such_package.rewards:f", "cannot import no_such_package.rewards")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            check_config(PipelineConfig.from_dict({"rewards": {"rewards": [{"name": name}]}}))
    with pytest.raises(ConfigError, match="takes no completions"):
        (user_file / "sig.py").write_text("def f(text):\n    return [0.0]\n")
        check_config(PipelineConfig.from_dict({"rewards": {"rewards": [{"name": "./sig.py:f"}]}}))


def test_a_python_callable_is_a_reward_too():
    def length(completions, **kwargs):
        return [float(len(c)) for c in completions]

    (reward,), _ = build_rewards([{"name": length, "weight": 2.0}])
    assert reward(completions=["ab", "abc"]) == [2.0, 3.0] and reward.__name__ == "length"


@pytest.mark.slow
def test_a_reward_from_a_users_file_drives_grpo_and_reaches_metrics_and_report(user_file, tiny_config):
    from llm_finetuning.pipeline import RunOptions, run

    config = tiny_config(*SIMPLE_SUMS, "sft_training.max_steps=40", "grpo_training.max_steps=2",
                         "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
                         "grpo_training.max_completion_length=16", "grpo_training.logging_steps=1",
                         "evaluation.num_samples=8", "evaluation.sampled_k=1", "data.synthetic.num_eval=8",
                         "rewards.rewards=[{name: match_format_exactly}, {name: './mine.py:short', weight: 2.0}]",
                         output_dir=Path(user_file) / "run")  # fmt: skip
    summary = run(config, RunOptions())
    assert summary["phases"]["grpo"]["settings"]["reward_weights"] == [1.0, 2.0]
    logs = [json.loads(line) for line in (user_file / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any("rewards/short/mean" in record for record in logs if record["phase"] == "grpo")
    assert "short" in summary["samples"]["after_grpo"][0]["rewards"]
    assert "short" in (user_file / "run" / "report.html").read_text()


@pytest.mark.slow
def test_the_python_api_takes_reward_callables_and_datasets(tmp_path, tiny_config):
    from datasets import Dataset

    from llm_finetuning.pipeline import RunOptions, run

    sums = [(a, b) for a in range(10) for b in range(10)]
    rows = Dataset.from_dict({"question": [f"What is {a} + {b}?" for a, b in sums],
                              "answer": [f"{a} + {b} = {a + b}\n#### {a + b}" for a, b in sums]})  # GSM8K's schema
    calls = []

    def answered(completions, answer, **kwargs):
        calls.append(len(completions))
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        return [float(str(gold) in text) for text, gold in zip(texts, answer, strict=True)]

    config = tiny_config("sft_training.max_steps=10", "grpo_training.max_steps=1", "grpo_training.num_generations=4",
                         "grpo_training.per_device_train_batch_size=8", "grpo_training.max_completion_length=16",
                         "evaluation.num_samples=4", "evaluation.sampled_k=1", "grpo_training.train_validation_split=0.9")  # fmt: skip
    summary = run(config, RunOptions(), rewards=[answered], sft_dataset=rows, grpo_dataset=rows)
    assert summary["phases"]["grpo"]["steps"] == 1 and calls
    assert summary["phases"]["grpo"]["settings"]["reward_weights"][-1] == 1.0
    assert "answered" in summary["samples"]["after_grpo"][0]["rewards"]
    assert "memory:grpo" in (tmp_path / "config.yaml").read_text()
