"""grader: math_verify — math-verify's verdict in the rewards and evaluation, run in the sandbox; refused in one
line where the package is missing."""

from __future__ import annotations

import time

import pytest

from llm_finetuning.config import PipelineConfig, PromptConfig
from llm_finetuning.errors import PipelineError
from llm_finetuning.evaluation.judge import CompletionJudge
from llm_finetuning.grading import grade, use_grader
from llm_finetuning.rewards import build_rewards

pytest.importorskip("math_verify", reason="the math-verify extra: uv sync --extra math-verify")


@pytest.fixture
def math_verify():
    use_grader("math_verify")
    yield
    use_grader("ours")


def test_its_verdicts_reach_evaluation_and_the_grading_rewards(math_verify):
    judge = CompletionJudge(PromptConfig(), *build_rewards([{"name": "accuracy"}], PromptConfig()))
    assert judge.is_correct("so <SOLUTION>\\frac{1}{2}</SOLUTION>", {"answer": "0.5"})
    assert not judge.is_correct("<SOLUTION>3</SOLUTION>", {"answer": "4"})
    assert judge.is_correct("the answer is $\\boxed{12}$", {"answer": "12"})  # no slot: math-verify reads the completion


def test_hostile_answers_return_within_its_deadline(math_verify):
    for text in ("9^{9^{9^9}}", "\\binom{\\binom{10^{1000}}{2000}}{50}", "__import__('os').system('true')"):
        started = time.perf_counter()
        assert grade(f"<SOLUTION>{text}</SOLUTION>", "1") is False
        assert time.perf_counter() - started < 15.0


def test_the_config_names_the_grader_and_refuses_a_missing_package(monkeypatch):
    assert PipelineConfig.from_yaml("configs/tiny.yaml", ["grader=math_verify"]).grader == "math_verify"
    from llm_finetuning.grading import math_verify as module

    monkeypatch.setattr(module, "problem", lambda: "needs the math-verify package: uv sync --extra math-verify")
    with pytest.raises(PipelineError, match="uv sync --extra math-verify"):
        use_grader("math_verify")
