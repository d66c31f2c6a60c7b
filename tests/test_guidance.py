"""grpo_training.guidance: which completions an all-wrong group gives up for its worked solution, on literal groups;
the worked solutions the data layer writes, on the tiny config's real problems; end to end through TRL's trainer
in tests/test_grpo_mechanisms.py."""

from __future__ import annotations

from conftest import SIMPLE_SUMS

from llm_finetuning.data import load_grpo_data
from llm_finetuning.data.processor import WORKED_COLUMN
from llm_finetuning.evaluation.judge import CompletionJudge
from llm_finetuning.rewards import build_rewards
from llm_finetuning.training.guidance import guide, guided_slots


def test_only_all_wrong_groups_with_a_worked_solution_are_guided_in_their_last_completion():
    correct = [False, False, False, False, True, False, False, False, False]
    worked = ["a", "a", "a", "b", "b", "b", "", "", ""]
    assert guided_slots(correct, worked, group=3) == [2]  # group 2 has a right answer, group 3 no solution
    assert guided_slots([False] * 4, ["a", "a", "b", "b"], group=2) == [1, 3]
    assert guided_slots([True] * 4, ["a", "a", "b", "b"], group=2) == []


def test_a_guided_completion_takes_the_worked_ids_and_unknown_sampling_logprobs():
    completion_ids = [[5, 6, 2], [7, 2], [8, 8, 8, 8]]
    logprobs = [[-0.1, -0.2, -0.3], [-0.4, -0.5], [-1.0] * 4]
    fits = {1: [9, 9, 9, 2], 2: None}  # slot 2's worked solution is over the budget: left as generated
    assert guide(completion_ids, logprobs, [1, 2], fits.get) == 1
    assert completion_ids == [[5, 6, 2], [9, 9, 9, 2], [8, 8, 8, 8]]
    assert logprobs == [[-0.1, -0.2, -0.3], [None] * 4, [-1.0] * 4]
    no_engine = [[1, 2], [3, 2]]
    assert guide(no_engine, None, [0], lambda slot: [4, 2]) == 1 and no_engine == [[4, 2], [3, 2]]


def test_grpo_rows_carry_a_worked_solution_the_judge_accepts_when_guidance_is_on(tiny_config, tiny_tokenizer):
    config = tiny_config(*SIMPLE_SUMS, "grpo_training.guidance=true")
    rows = load_grpo_data(config, tiny_tokenizer).train
    judge = CompletionJudge(config.prompt, *build_rewards(config.rewards, config.prompt))
    sample = [rows[index] for index in range(0, len(rows), max(1, len(rows) // 40))]
    assert all(row[WORKED_COLUMN] for row in sample)  # the synthetic sums all come with a working
    assert all(judge.is_correct(row[WORKED_COLUMN], row) for row in sample)
    assert all(judge.is_formatted([row[WORKED_COLUMN]])[0] for row in sample)
    unguided = load_grpo_data(tiny_config(*SIMPLE_SUMS), tiny_tokenizer).train
    assert WORKED_COLUMN not in unguided.column_names
