"""Answer-only GRPO data (``data.grpo.answer_only``): no GRPO row carries a worked or reference solution, and no
reward or mechanism that would read one is accepted; on real files and the demo's generated problems."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SIMPLE_SUMS

from llm_finetuning.data import load_grpo_data
from llm_finetuning.data.processor import SOLUTION_COLUMNS, WORKED_COLUMN
from llm_finetuning.rewards import REWARDS
from llm_finetuning.schema import ConfigError
from llm_finetuning.session.checks import check_config

MATH = Path(__file__).parent / "data" / "hendrycks_math"
MATH_GRPO = [f"data.grpo.name={MATH}", "data.grpo.subset=[algebra, geometry]", "data.grpo.split=test",
             "data.grpo.format=math"]  # fmt: skip
WORKING_READERS = sorted(name for name, reward in REWARDS.items() if reward.gold_column == WORKED_COLUMN)


def test_answer_only_rows_of_a_dataset_with_solutions_keep_the_problem_and_answer_alone(tiny_config, tiny_tokenizer):
    with_solutions = load_grpo_data(tiny_config(*MATH_GRPO), tiny_tokenizer).train
    assert "reference_solution" in with_solutions.column_names  # the positive control: the file has solutions
    answer_only = load_grpo_data(tiny_config(*MATH_GRPO, "data.grpo.answer_only=true"), tiny_tokenizer).train
    assert not set(SOLUTION_COLUMNS) & set(answer_only.column_names)
    assert {"prompt", "answer"} <= set(answer_only.column_names) and len(answer_only) == len(with_solutions)
    solutions = set(with_solutions["reference_solution"])
    assert not any(str(value) in solutions for row in answer_only for value in row.values())


def test_the_demo_problems_answer_only_carry_no_worked_solution_though_a_reward_reads_one_elsewhere(
    tiny_config, tiny_tokenizer
):
    reader = "rewards.rewards=[{name: check_working}, {name: match_format_exactly}]"
    assert WORKED_COLUMN in load_grpo_data(tiny_config(*SIMPLE_SUMS, reader), tiny_tokenizer).train.column_names
    rows = load_grpo_data(tiny_config(*SIMPLE_SUMS, "data.grpo.answer_only=true"), tiny_tokenizer).train
    assert not set(SOLUTION_COLUMNS) & set(rows.column_names)


@pytest.mark.parametrize("reward", WORKING_READERS)
def test_a_reward_that_reads_a_worked_solution_is_refused_naming_it(reward, tiny_config):
    rewards = f"rewards.rewards=[{{name: {reward}}}, {{name: match_format_exactly}}]"
    check_config(tiny_config(rewards))  # accepted where the rows have worked solutions
    with pytest.raises(ConfigError, match=f"rewards: {reward} scores against a worked solution"):
        check_config(tiny_config(rewards, "data.grpo.answer_only=true"))


def test_guidance_and_answer_only_sft_are_refused_in_one_line(tiny_config):
    with pytest.raises(ConfigError, match="grpo_training.guidance: guidance writes worked solutions") as caught:
        check_config(tiny_config("data.grpo.answer_only=true", "grpo_training.guidance=true"))
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="data.sft.answer_only: SFT learns from worked solutions"):
        check_config(tiny_config("data.sft.answer_only=true"))


def test_every_reward_reading_a_worked_solution_is_checked():
    assert WORKING_READERS == ["check_working"]  # a new one is refused by the same rule: its gold_column
