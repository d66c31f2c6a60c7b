"""grpo_training.curriculum: levels, weights, draws and saved state on literal inputs; end to end on the tiny model
through TRL's real trainer (marked slow)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from datasets import Dataset
from test_grpo_mechanisms import SHORT_GRPO

from llm_finetuning.errors import PipelineError
from llm_finetuning.schema import ConfigError
from llm_finetuning.training.curriculum import Curriculum, level_name

EASY, HARD = '{"num_digits": 1, "num_terms": 3}', '{"num_digits": 2, "num_terms": 5}'


def test_levels_are_named_by_their_settings_in_a_stable_order():
    assert level_name('{"num_terms": 4, "num_digits": 2}') == "num_digits=2,num_terms=4"
    assert level_name("Level 3") == "Level 3" and level_name(5) == "5"
    assert level_name("{not json") == "{not json"
    assert Curriculum([HARD, EASY, HARD], window=4, seed=0).levels == ["num_digits=1,num_terms=3",
                                                                        "num_digits=2,num_terms=5"]


def test_a_level_weighs_as_much_as_its_recent_groups_held_right_and_wrong_answers():
    curriculum = Curriculum([EASY, HARD], window=3, seed=0)
    assert curriculum.weights() == [0.5, 0.5]  # untried: one half each
    easy, hard = curriculum.levels
    curriculum.observe([easy] * 3, [[1, 1], [1, 1], [1, 1]])  # mastered: every group all right
    curriculum.observe([hard] * 3, [[1, 0], [0, 1], [0, 0]])  # learning: two of three groups mixed
    assert curriculum.weights() == [pytest.approx(1 / 5), pytest.approx(3 / 5)]
    assert curriculum.pass_rates() == {easy: 1.0, hard: pytest.approx(1 / 3)}
    curriculum.observe([easy] * 3, [[1, 0], [1, 0], [0, 1]])  # the window holds the last three groups only
    assert curriculum.weights()[0] == pytest.approx(4 / 5) and curriculum.pass_rates()[easy] == 0.5


def test_draws_follow_the_weights_and_take_each_problem_of_a_level_once_before_any_again():
    values = [EASY] * 10 + [HARD] * 10
    curriculum = Curriculum(values, window=8, seed=3)
    easy, hard = curriculum.levels
    curriculum.observe([easy] * 8, [[1, 1]] * 8)  # weight 0.1
    curriculum.observe([hard] * 8, [[1, 0]] * 8)  # weight 0.9
    drawn = [curriculum.draw(10) for _ in range(3)]
    levels = Counter(curriculum.names[index] for step in drawn for index in step)
    assert levels[hard] > 3 * levels[easy]
    hard_draws = [index for step in drawn for index in step if curriculum.names[index] == hard]
    first_pass = hard_draws[:10]
    assert len(set(first_pass)) == len(first_pass)  # fresh problems until the level is used up
    assert len(first_pass) == 10 and hard_draws == [first_pass[i % 10] for i in range(len(hard_draws))]  # then again
    assert drawn[0] != drawn[1] and curriculum.draws == 3


def test_a_curriculum_restored_from_its_saved_state_draws_what_the_original_would(tmp_path):
    values = [EASY, HARD] * 20
    original = Curriculum(values, window=4, seed=7)
    original.draw(6)
    original.observe([original.levels[1]] * 2, [[1.0, 0.0], [0.0, 0.0]])
    original.save(tmp_path)
    restored = Curriculum(values, window=4, seed=7)
    assert restored.load(tmp_path) and restored.state() == original.state()
    assert restored.draw(6) == original.draw(6) and restored.weights() == original.weights()
    assert not Curriculum(values, window=4, seed=7).load(tmp_path / "missing")
    other = Curriculum(['{"n": 1}'] * 3, window=4, seed=7)  # another task's levels: the saved state does not apply
    other.restore(original.state())
    assert other.draws == 0


def test_problems_without_a_level_are_refused_in_one_line_and_the_window_is_checked(tiny_config):
    with pytest.raises(PipelineError, match="no difficulty or level column.*curriculum: false"):
        Curriculum.of(Dataset.from_dict({"prompt": ["a"], "answer": ["1"]}), window=4, seed=0)
    by_level = Curriculum.of(Dataset.from_dict({"prompt": ["a", "b"], "level": ["Level 1", "Level 5"]}), 4, 0)
    assert by_level.levels == ["Level 1", "Level 5"]
    with pytest.raises(ConfigError, match="curriculum_window"):
        tiny_config("grpo_training.curriculum_window=0")


@pytest.mark.slow
def test_grpo_draws_its_problems_from_the_curriculum_and_saves_its_state(tmp_path, tiny_config):
    from llm_finetuning.pipeline import RunOptions, run

    config = tiny_config(*SHORT_GRPO, "grpo_training.curriculum=true", "grpo_training.oversample=2",
                         "data.synthetic.operations=[\"+\", \"-\"]",  # two kinds of problem: two levels
                         "grpo_training.save_steps=2")  # fmt: skip
    summary = run(config, RunOptions())
    assert summary["complete"] is True
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["phase"] == "grpo" and "groups/trained_signal" in r]
    assert len(steps) == 4
    for record in steps:  # the demo's kinds of problem (its operations) are the levels; each step's draw is whole
        drawn = {key: value for key, value in record.items() if key.startswith("curriculum/drawn/")}
        assert len(drawn) >= 2 and sum(drawn.values()) == pytest.approx(1.0)
        assert any(key.startswith("curriculum/pass_rate/") for key in record)
    state = json.loads((tmp_path / "grpo" / "checkpoint-2" / "curriculum.json").read_text())
    assert state["draws"] == 2 and sum(state["cursor"].values()) == 2 * 4  # 2 steps x (2 prompts x oversample 2)
    assert sum(len(groups) for groups in state["recent"].values()) == 8
    final = json.loads((tmp_path / "grpo" / "checkpoint-4" / "curriculum.json").read_text())
    assert final["draws"] == 4
