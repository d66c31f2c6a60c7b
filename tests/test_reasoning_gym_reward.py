"""The ``reasoning_gym`` reward on the real package: literal completions against real entries, a verifier that
raises, the reward contract (pickling, threads, a spawned process, hostile text), and evaluation scoring it
and judging a reasoning-gym row by the same verifier.

Run with ``uv run --extra reasoning-gym pytest -m reasoning_gym``; skipped, saying so, without the extra.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import multiprocessing
import pickle
import subprocess
import sys
import time

import pytest
from conftest import ROOT, reasoning_gym_marks

from llm_finetuning.config import PromptConfig
from llm_finetuning.evaluation.judge import CompletionJudge
from llm_finetuning.evaluation.scoring import score_problems
from llm_finetuning.rewards import build_rewards, get_reward
from llm_finetuning.rollout import Completion
from llm_finetuning.tasks import task_for
from llm_finetuning.tasks.gym import _WARNED, entry_ref, task_dataset

pytestmark = reasoning_gym_marks()

SUMS = {"min_terms": 2, "max_terms": 2, "max_digits": 1}
SUM_REF = entry_ref("chain_sum", SUMS, seed=1, size=1, index=0)  # "4 - 1 =", answer 3
FACTOR_REF = entry_ref("prime_factorization", {}, seed=1, size=1, index=0)
DONE = "4 - 1 = 3<end_working_out><SOLUTION>{}</SOLUTION>"


def score(completions, ref=SUM_REF, reward=None):
    reward = reward or get_reward("reasoning_gym")
    return reward(prompts=["Q"] * len(completions), completions=completions, answer=["3"] * len(completions),
                  reasoning_gym_entry=[ref] * len(completions))  # fmt: skip


def test_the_example_entry_is_the_one_the_cases_assume():
    entry = task_dataset("chain_sum", SUMS, seed=1, size=1)[0]
    assert (entry["question"].endswith("4 - 1 ="), entry["answer"]) == (True, "3")


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (DONE.format("3"), 1.0),
        (DONE.format(" 3 \n"), 1.0),  # the slot's text is stripped
        (DONE.format("3.0"), 1.0),  # chain_sum's verifier reads numbers
        (DONE.format("4"), 0.0),
        (DONE.format(""), 0.0),
        ("The answer is 3.", 0.0),  # no slot
        ("<SOLUTION>3", 0.0),  # a slot left open (cut off)
        ("<SOLUTION>2</SOLUTION> then <SOLUTION>3</SOLUTION>", 1.0),  # the last slot, as the grader reads it
        ("<answer>3</answer>", 1.0),  # the grader's second slot
        ("<SOLUTION>3</SOLUTION><|im_end|><|im_start|>user\n<SOLUTION>4</SOLUTION>", 1.0),  # its own turn only
        ([{"role": "assistant", "content": DONE.format("3")}], 1.0),
        ("", 0.0),
    ],
)
def test_literal_completions_are_scored_by_the_tasks_verifier(completion, expected):
    assert score([completion]) == [expected]


def test_gsm_symbolic_partial_credit_is_the_verifiers_own():
    entry = task_dataset("gsm_symbolic", {}, seed=0, size=1)[0]
    ref = entry_ref("gsm_symbolic", {}, seed=0, size=1, index=0)
    right, wrong = f"<SOLUTION>{entry['answer']}</SOLUTION>", f"<SOLUTION>{int(entry['answer']) + 1}</SOLUTION>"
    assert score([right, wrong, "<SOLUTION>none</SOLUTION>"], ref) == [1.0, 0.01, 0.0]


def test_an_entry_whose_json_copy_would_score_wrong_is_rebuilt_exactly():
    ref = entry_ref("arc_agi", {}, seed=1, size=3, index=0)
    entry = task_dataset("arc_agi", {}, seed=1, size=3)[0]
    assert score([f"<SOLUTION>{entry['answer']}</SOLUTION>"], ref) == [1.0]


def test_a_verifier_that_raises_scores_zero_and_warns_once(caplog):
    _WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="llm_finetuning.tasks.gym"):
        assert score(["<SOLUTION>{</SOLUTION>"] * 3, FACTOR_REF) == [0.0, 0.0, 0.0]
        assert score(["<SOLUTION>{</SOLUTION>"], FACTOR_REF) == [0.0]
    warnings = [r for r in caplog.records if "prime_factorization raised ValueError" in r.getMessage()]
    assert len(warnings) == 1


SPIRAL_REF = entry_ref("spiral_matrix", {}, seed=1, size=1, index=0)  # its verifier eval()s the answer
COUNTDOWN_REF = entry_ref("countdown", {}, seed=1, size=1, index=0)  # its verifier hands the answer to sympy


def test_an_answer_written_as_code_runs_nowhere(tmp_path):
    target = tmp_path / "written"
    code = [f"open({str(target)!r}, 'w').write('x')", f"__import__('os').system('touch {target}')",
            f"__import__('subprocess').run(['touch', {str(target)!r}])",
            f"[__import__('os').remove(p) for p in [{str(tmp_path / 'kept')!r}]]"]  # fmt: skip
    (tmp_path / "kept").write_text("the user's")
    assert score([f"<SOLUTION>{line}</SOLUTION>" for line in code], SPIRAL_REF) == [0.0] * len(code)
    assert not target.exists()
    assert (tmp_path / "kept").read_text() == "the user's"


def test_an_answer_that_would_compute_forever_scores_zero_at_the_deadline(caplog):
    _WARNED.clear()
    reward = get_reward("reasoning_gym", timeout=1.0)
    right = f"<SOLUTION>{task_dataset('countdown', {}, seed=1, size=1)[0]['metadata']['expression']}</SOLUTION>"
    with caplog.at_level(logging.WARNING, logger="llm_finetuning.tasks.gym"):
        assert score(["<SOLUTION>9**9**9**9</SOLUTION>"], COUNTDOWN_REF, reward) == [0.0]  # also starts a spare
        assert score([right], COUNTDOWN_REF) == [1.0]  # served by the replacement, once it has started
        started = time.perf_counter()  # a warm spare takes over from now on: the time is the answer's own
        assert score(["<SOLUTION>9**9**9**9</SOLUTION>"], COUNTDOWN_REF, reward) == [0.0]
        assert time.perf_counter() - started < 1.0 + 1.0
    assert sum("countdown overran its time" in r.getMessage() for r in caplog.records) == 1  # once per kind


def test_an_unreadable_reference_scores_zero():
    assert score([DONE.format("3")], ref="not json") == [0.0]


def test_rows_without_an_entry_are_not_its_business():
    assert get_reward("reasoning_gym")(completions=[DONE.format("3")], answer=["3"]) == [None]


def test_the_prompt_tags_reach_it_and_bad_tags_are_refused():
    reward = build_rewards([{"name": "reasoning_gym"}], PromptConfig(solution_start="<ans>", solution_end="</ans>"))
    assert score(["<ans>3</ans>", DONE.format("3")], reward=reward[0][0]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="reasoning_gym: parameter 'solution_start' must be a non-empty tag"):
        get_reward("reasoning_gym", solution_start="")


COMPLETIONS = [DONE.format("3"), DONE.format("5"), "no slot", ""]


def score_batch(reward):
    return score(COMPLETIONS, reward=reward)


def test_pickled_threaded_and_spawned_copies_score_the_same():
    reward = get_reward("reasoning_gym")
    expected = score_batch(reward)
    assert expected == [1.0, 0.0, 0.0, 0.0]
    assert score_batch(pickle.loads(pickle.dumps(reward))) == expected
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(score_batch, [reward] * 8)) == [expected] * 8
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        assert list(pool.map(score_batch, [reward])) == [expected]


def test_hostile_completions_score_inside_the_bounds_quickly():
    hostile = ["<SOLUTION>" + "9" * 100_000 + "</SOLUTION>", "<SOLUTION>" * 50_000, "\\boxed{" * 10_000,
               "<SOLUTION>\x00\ud800</SOLUTION>", "<SOLUTION>1e999</SOLUTION>", "<SOLUTION>-</SOLUTION>",
               "<SOLUTION>__import__('os').getcwd()</SOLUTION>", "<SOLUTION>[0] * 10**10</SOLUTION>"]  # fmt: skip
    for ref in (SUM_REF, FACTOR_REF, entry_ref("gsm_symbolic", {}, 0, 1, 0), SPIRAL_REF):
        started = time.perf_counter()
        scores = score(hostile, ref)
        assert time.perf_counter() - started < 2.0
        assert all(isinstance(s, float) and 0.0 <= s <= 1.0 for s in scores)


def test_evaluation_scores_it_on_a_held_out_row_as_grpo_does():
    funcs, weights = build_rewards([{"name": "reasoning_gym", "weight": 2.0}], PromptConfig())
    judge = CompletionJudge(PromptConfig(), funcs, weights)
    row = {"prompt": [{"role": "user", "content": "4 - 1 ="}], "answer": "3", "reasoning_gym_entry": SUM_REF}
    group = [Completion(DONE.format("3"), 12, True), Completion(DONE.format("5"), 12, True)]
    (result,) = score_problems(judge, [row], [group])
    assert result["rewards"] == {"reasoning_gym": [1.0, 0.0]}
    assert result["total_reward"] == [2.0, 0.0]


def test_a_reasoning_gym_row_is_judged_right_by_its_verifier_not_the_math_grader():
    judge = CompletionJudge(PromptConfig())
    row = {"prompt": [{"role": "user", "content": "4 - 1 ="}], "answer": "3", "reasoning_gym_entry": SUM_REF}
    graded = {key: value for key, value in row.items() if key != "reasoning_gym_entry"}
    fraction, plain = DONE.format("\\frac{6}{2}"), DONE.format(" 3 ")
    assert task_for(row).name == "reasoning_gym" and task_for(graded).name == "graded"
    assert score([fraction, plain]) == [0.0, 1.0]  # chain_sum's verifier reads decimals, not LaTeX
    assert [judge.is_correct(text, row) for text in (fraction, plain)] == [False, True]
    assert [judge.is_correct(text, graded) for text in (fraction, plain)] == [True, True]  # the grader's verdict
    (result,) = score_problems(judge, [row], [[Completion(fraction, 12, True), Completion(plain, 12, True)]])
    assert result["correct"] == [False, True]


def test_partial_credit_from_a_verifier_is_not_right():
    entry = task_dataset("gsm_symbolic", {}, seed=0, size=1)[0]
    row = {"answer": str(entry["answer"]), "reasoning_gym_entry": entry_ref("gsm_symbolic", {}, seed=0, size=1, index=0)}
    judge = CompletionJudge(PromptConfig())
    right, near = (f"<SOLUTION>{value}</SOLUTION>" for value in (entry["answer"], int(entry["answer"]) + 1))
    assert [judge.is_correct(text, row) for text in (right, near)] == [True, False]  # the verifier gave 0.01


@pytest.mark.parametrize(
    ("entries", "started"),
    [([SUM_REF], "True False"), ([""], "False True"), ([SUM_REF, ""], "True True")],
    ids=["reasoning-gym rows", "graded rows", "both"],
)
def test_the_workers_started_are_those_the_rows_are_judged_in(entries, started):
    """reasoning-gym's verifier (its import takes seconds) starts only where a row is a reasoning-gym row, the
    grader's sympy worker only where one is graded, in the background."""
    rows = [{"answer": "3", "reasoning_gym_entry": entry} for entry in entries]
    code = (
        "import json, sys\n"
        "from llm_finetuning.grading import symbolic\n"
        "from llm_finetuning.tasks import gym, start_judges\n"
        "start_judges(json.load(sys.stdin))\n"
        "print(gym._VERIFIER.started(), symbolic.started())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], input=json.dumps(rows), capture_output=True, text=True,
                            timeout=300, check=True, cwd=ROOT)  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == started


def test_the_worker_is_asked_once_per_entry_and_answer_and_an_overrun_is_asked_again(monkeypatch):
    """Each answer is scored in a fresh copy of one worker, so a verdict depends on the entry and the answer alone:
    the parent keeps the verdicts it got (a group's repeated answers cost one fork); never an overrun, which the
    machine's load may decide."""
    from llm_finetuning.tasks import gym

    asked, call = [], gym._VERIFIER.call
    monkeypatch.setattr(gym._VERIFIER, "call", lambda request, timeout: asked.append(request[0]) or call(request, timeout))
    gym._VERDICTS.clear()
    right = task_dataset("countdown", {}, seed=1, size=1)[0]["metadata"]["expression"]
    answers = [right, right, "1 + 1", right, "1 + 1", "9**9**9**9", "9**9**9**9"]
    scores = score([f"<SOLUTION>{answer}</SOLUTION>" for answer in answers], COUNTDOWN_REF, get_reward("reasoning_gym", timeout=1.0))
    assert scores == [1.0, 1.0, 0.05, 1.0, 0.05, 0.0, 0.0]  # countdown: 0.05 for a wrong expression
    assert asked.count("score") == 4  # right, "1 + 1", and the overrun twice
