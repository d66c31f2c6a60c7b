"""The check_working reward: credit for the worked solution's lines a completion reproduces, on literal completions;
the GRPO rows it reads, on the tiny config's real problems; what it gives an all-wrong group under the gate."""

from __future__ import annotations

import torch
from conftest import SIMPLE_SUMS, gated_advantages

from llm_finetuning.data import load_grpo_data
from llm_finetuning.data.processor import WORKED_COLUMN
from llm_finetuning.rewards import build_rewards, get_reward
from llm_finetuning.tasks.workings import expression_working

END = "<end_working_out><SOLUTION>{}</SOLUTION>"
WORKED = "<start_working_out>12 + 47 - 8 = 59 - 8\n59 - 8 = 51" + END.format(51)


def check(*completions, worked=WORKED):
    return get_reward("check_working")(completions=list(completions), worked_completion=[worked] * len(completions))


def test_credit_is_the_share_of_lines_followed_before_the_first_difference():
    assert check(
        "12 + 47 - 8 = 59 - 8\n59 - 8 = 51" + END.format(51),  # the worked solution
        "<start_working_out>12 + 47 - 8 = 59 - 8\n59 - 8 = 41" + END.format(41),  # slips on the second line
        "12 + 47 - 8 = 69 - 8\n69 - 8 = 61" + END.format(61),  # slips at once: the rest cannot count
        "12 + 47 = 59" + END.format(59),  # drops the last term
        "59 - 8 = 51\n12 + 47 - 8 = 59 - 8" + END.format(51),  # the right lines, out of order
    ) == [1.0, 0.5, 0.0, 0.0, 0.0]


def test_spaces_and_blank_lines_do_not_count_but_a_cut_off_working_keeps_its_lines():
    assert check("  12 +  47 - 8 = 59 - 8 \n\n59 - 8   = 51\n" + END.format(51)) == [1.0]
    assert check("12 + 47 - 8 = 59 - 8\n59 -") == [0.5]  # cut at the token budget: no end tag
    assert check("12 + 47 - 8 = 59 - 8<end_working_out>59 - 8 = 51") == [0.5]  # after the tag is not working


def test_a_row_without_a_worked_solution_is_not_scored():
    assert check("12 + 47 = 59", worked="") == [None]
    assert get_reward("check_working")(completions=["12 + 47 = 59"], answer=["59"]) == [None]


def test_the_credit_follows_the_workings_the_data_layer_writes():
    for expression, style in (("6 - 0 + 5", "rewrite"), ("12 + 5 - 3 * 2", "lines"), ("91 - 45 + 3 - 17", "rewrite")):
        working = expression_working(expression, style=style)
        worked = working.text + END.format(working.answer)
        lines = working.text.splitlines()
        wrong_last = "\n".join([*lines[:-1], lines[-1] + "0"]) + END.format(working.answer + "0")
        assert check(worked, wrong_last, worked=worked) == [1.0, (len(lines) - 1) / len(lines)]


def test_hostile_completions_score_within_bounds_and_never_raise():
    hostile = ["", "\n" * 10_000, WORKED * 200, "<end_working_out>" * 1000, "\x00\ud800", "12 + 47 - 8 = 59 - 8\r\n"]
    scores = check(*hostile)
    assert all(isinstance(score, float) and 0.0 <= score <= 1.0 for score in scores)
    assert scores[2] == 1.0 and scores[5] == 0.5


def test_in_an_all_wrong_group_the_working_credit_is_the_only_signal_under_the_gate():
    """Format and answer rewards at weight 0, check_working at 1: the tied group's advantages order its
    completions by how far their working went right, and a group where correctness differs ignores it."""
    second_slip = "12 + 47 - 8 = 59 - 8\n59 - 8 = 41" + END.format(41)
    first_slip = "12 + 47 - 8 = 69 - 8\n69 - 8 = 61" + END.format(61)
    completions = [second_slip, first_slip]
    credit = torch.tensor(check(*completions * 2))  # a group of four: two of each
    correct = torch.zeros(4)
    advantages = gated_advantages(correct, credit, group=4, scale="group", tie_weight=1.0)
    assert advantages[0] > 0 > advantages[1] and torch.allclose(advantages[0], advantages[2])
    one_right = gated_advantages(torch.tensor([1.0, 0, 0, 0]), credit, group=4, scale="group", tie_weight=1.0)
    assert one_right[0] > 0
    assert torch.allclose(one_right[1], one_right[2]) and torch.allclose(one_right[1], one_right[3])


def test_grpo_rows_carry_the_worked_solutions_when_a_reward_reads_them(tiny_config, tiny_tokenizer):
    config = tiny_config(*SIMPLE_SUMS, "rewards.rewards=[{name: check_working}, {name: match_format_exactly}]")
    rows = load_grpo_data(config, tiny_tokenizer).train
    assert rows[0][WORKED_COLUMN]  # the synthetic sums come with a working
    funcs, _ = build_rewards(config.rewards, config.prompt)
    first = {name: [rows[index][name] for index in range(4)] for name in rows.column_names}
    assert funcs[0](completions=first[WORKED_COLUMN], **first) == [1.0] * 4  # a worked solution follows itself
