"""Expert iteration: which completions a round keeps (literal inputs), and the phase run for real on the tiny model
after the demo's SFT, from the saved SFT adapter, through SFT's real trainer."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import TEST_SCHEDULE, demo_config

from llm_finetuning.pipeline import RunOptions, run
from llm_finetuning.reporting.run_outputs import format_table
from llm_finetuning.training.expert_iteration import accepted_rows, round_problems

PROMPT = [{"role": "user", "content": "2 + 3"}]
RIGHT, OTHER_RIGHT, WRONG = "2 + 3 = 5<SOLUTION>5</SOLUTION>", "5<SOLUTION>5</SOLUTION>", "<SOLUTION>6</SOLUTION>"


def scored(completions, correct, finished=None):
    return {"completions": completions, "correct": correct, "finished": finished or [True] * len(completions)}


def test_a_round_keeps_distinct_accepted_finished_completions_up_to_the_cap_in_sampled_order():
    problems = [{"prompt": PROMPT, "answer": "5"}, {"prompt": PROMPT, "answer": "5"}]
    results = [
        scored([WRONG, RIGHT, " " + RIGHT + "\n", OTHER_RIGHT, RIGHT + "!"], [False, True, True, True, True]),
        scored([RIGHT, OTHER_RIGHT], [True, True], finished=[False, True]),  # the first was cut at the budget
    ]
    rows = accepted_rows(problems, results, keep_per_problem=2)
    assert [row["completion"][0]["content"] for row in rows] == [RIGHT, OTHER_RIGHT, OTHER_RIGHT]
    assert all(row["prompt"] == PROMPT and row["completion"][0]["role"] == "assistant" for row in rows)
    assert accepted_rows(problems, [scored([WRONG], [False]), scored([WRONG], [False])], 2) == []


def test_rounds_take_the_next_problems_and_wrap_around():
    assert round_problems(10, 4, 0) == [0, 1, 2, 3]
    assert round_problems(10, 4, 2) == [8, 9, 0, 1]
    assert sorted(round_problems(3, 8, 1)) == [0, 1, 2]  # fewer problems than a round asks: each once


@pytest.mark.slow
def test_expert_iteration_after_sft_fine_tunes_on_what_it_got_right(tmp_path):
    """SFT, then two rounds of expert iteration on the demo's problems (GRPO skipped): every round samples,
    keeps and fine-tunes; the adapter, the evaluation and the records are there; a resumed run repeats nothing."""
    rounds = ["expert_iteration.rounds=2", "expert_iteration.problems_per_round=16",
              "expert_iteration.samples_per_problem=4", "expert_iteration.keep_per_problem=2"]  # fmt: skip
    config = demo_config(tmp_path, *TEST_SCHEDULE, *rounds)
    summary = run(config, RunOptions(skip_grpo=True))
    records = summary["phases"]["expert_iteration"]["settings"]["rounds"]
    assert [record["round"] for record in records] == [1, 2]
    for record in records:
        assert record["problems"] == 16 and record["sampled"] == 64
        assert record["kept"] <= min(record["accepted"], 2 * record["solved"])
    assert sum(record["kept"] for record in records) > 0  # the demo's SFT solves some: there is something to learn
    assert summary["phases"]["expert_iteration"]["steps"] == sum(record["steps"] for record in records) > 0
    assert (tmp_path / "expert_iteration" / "final").is_dir()
    assert summary["eval"]["after_expert_iteration"]["n"] == summary["eval"]["after_sft"]["n"]
    assert "after EI" in format_table(summary) and summary["eval"]["after_grpo"] is None
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["kept"] for r in logged if r["phase"] == "expert_iteration_round"] == [r["kept"] for r in records]
    assert "expert iteration" in (tmp_path / "expert_iteration" / "final" / "README.md").read_text()

    again = run(config, RunOptions(skip_grpo=True, resume=True))  # everything was done: nothing runs again
    assert again["phases"]["expert_iteration"] == summary["phases"]["expert_iteration"]
    assert again["eval"]["after_expert_iteration"] == summary["eval"]["after_expert_iteration"]
    shutil.rmtree(tmp_path / "expert_iteration")
