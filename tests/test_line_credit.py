"""grpo_training.line_credit: working lines read and checked against the answer alone, the spans they give in
characters and in tokens, the per-token advantages; end to end on the tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from llm_finetuning.grading.lines import CreditSpan, credit_span, equation_sides
from llm_finetuning.schema import ConfigError
from llm_finetuning.training.line_credit import figures, in_tokens, token_advantages, token_ends

END = "<end_working_out>"
RIGHT = "4 + 3 - 2 + 5 = 7 - 2 + 5\n7 - 2 + 5 = 5 + 5\n5 + 5 = 10" + END + "<SOLUTION>10</SOLUTION>"


@pytest.mark.parametrize(("line", "sides"), [
    ("44 - 84 + 75 = -40 + 75", [35, 35]), ("  3 * (2 + 1) = 9 ", [9, 9]), ("4+3+1=08", [8, 8]),
    ("-5 + 6 = -11", [1, -11]), ("1 = 1 = 2", [1, 1, 2]),
    ("The sum is 35.", None), ("7 =", None), ("= 7", None), ("8 / 2 = 4", None), ("2 ** 3 = 8", None),
    ("1 2 = 12", None), ("()", None), ("9" * 31 + " = 1", None), ("1 + " * 60 + "1 = 61", None),
])  # fmt: skip
def test_a_line_is_read_as_an_equation_of_integer_expressions_or_not_at_all(line, sides):
    assert equation_sides(line) == sides


def test_a_right_working_is_accepted_to_its_end_and_nothing_is_rejected():
    assert credit_span(RIGHT, "10", "equal_to_answer", END) == CreditSpan(len(RIGHT.split(END)[0]), None)


def test_the_first_line_that_leaves_the_answer_is_where_the_working_went_wrong():
    wrong = "4 + 3 - 2 + 5 = 7 - 2 + 5\n7 - 2 + 5 = 4 + 5\n4 + 5 = 9" + END + "<SOLUTION>9</SOLUTION>"
    assert credit_span(wrong, "10", "equal_to_answer", END) == CreditSpan(38, 38)  # right up to "4 + 5"
    # an unequal line is wrong to both checks, from its first side that disagrees
    assert credit_span("4 + 3 - 2 + 5 = 7 - 2\n7 - 2 = 5" + END, "10", "equations", END) == CreditSpan(16, 16)
    # a side 0 that leaves the answer (a miscopied expression) is wrong from the line's start
    miscopied = "4 + 3 - 2 + 5 = 7 - 2 + 5\n7 - 2 + 6 = 11" + END
    assert credit_span(miscopied, "10", "equal_to_answer", END) == CreditSpan(25, 26)
    # a term dropped in copying the expression keeps each line's sides equal: only the answer's value shows it
    dropped = "4 + 3 - 2 = 7 - 2\n7 - 2 = 5" + END
    assert credit_span(dropped, "10", "equations", END) == CreditSpan(27, None)
    assert credit_span(dropped, "10", "equal_to_answer", END) == CreditSpan(0, 0)


def test_lines_that_are_not_equations_neither_accept_nor_reject_and_only_the_working_is_read():
    text = "First add.\n4 + 6 = 10\nThen stop." + END + "<SOLUTION>1 + 1 = 3</SOLUTION>"
    assert credit_span(text, "10", "equations", END) == CreditSpan(21, None)
    # without the working's end, the working stops where the answer opens
    assert credit_span("4 + 6 = 10\n<SOLUTION>1 = 2", "10", "equations", END, "<SOLUTION>") == CreditSpan(10, None)
    assert credit_span("no working at all", "10", "equal_to_answer", END) == CreditSpan(0, None)
    assert credit_span("4 + 6 = 10", "ten", "equal_to_answer", END) == CreditSpan(0, 0)  # no number to equal


class Pieces:
    """A tokenizer of literal pieces: token i decodes to PIECES[i]; 99 decodes to nothing (a special token)."""

    PIECES = ("4", " +", " 6", " =", " 10", "\n", "1", "0", " =", " 9", "<end>")

    def decode(self, ids, skip_special_tokens=True):
        return "".join(self.PIECES[i] if i < len(self.PIECES) else "" for i in ids)

    def batch_decode(self, batch, skip_special_tokens=True):
        return [self.decode(ids) for ids in batch]


def test_character_spans_become_the_tokens_wholly_before_them():
    ids = [*range(11), 99]
    ends = token_ends(ids, Pieces().decode(ids), Pieces())
    assert ends == [1, 3, 5, 7, 10, 11, 12, 13, 15, 17, 22, 22]
    # "4 + 6 = 10" accepted, "10 = 9" rejected at its "9" (character 16): the 9 tokens before it were right
    assert in_tokens(credit_span(Pieces().decode(range(11)), "10", "equations", "<end>"), ends) == CreditSpan(9, 9)
    assert in_tokens(CreditSpan(10, 11), ends) == CreditSpan(5, 6)  # the "\n" between (10-11) keeps its advantage
    assert in_tokens(CreditSpan(10, 11), None) == CreditSpan(0, None)  # pieces that do not add up move nothing


class SplitCharacter(Pieces):
    def decode(self, ids, skip_special_tokens=True):
        return "é" if list(ids) == [0, 1] else "\ufffd"


def test_tokens_that_do_not_decode_alone_to_their_text_give_no_offsets():
    assert token_ends([0, 1], SplitCharacter().decode([0, 1]), SplitCharacter()) is None


def test_a_wrong_answer_keeps_its_advantage_from_the_first_wrong_line_and_a_right_one_up_to_it():
    advantages = torch.tensor([-1.0, 0.5, 0.5, 0.0])
    spans = [CreditSpan(2, 3), CreditSpan(4, None), CreditSpan(1, 2), CreditSpan(3, None)]
    assert token_advantages(advantages, spans, 5).tolist() == [
        [0.0, 0.0, -1.0, -1.0, -1.0],  # the two accepted tokens carry nothing of the negative advantage
        [0.5] * 5,  # right throughout
        [0.5, 0.5, 0.0, 0.0, 0.0],  # right answer, wrong line from token 2: not taught from there
        [0.0] * 5,
    ]
    mask = torch.tensor([[1, 1, 1, 1, 0]] * 4)
    assert figures(advantages, spans, mask) == {"line_credit/negative_tokens_freed": 0.5,
                                                "line_credit/negative_rows_located": 1.0}  # fmt: skip
    assert figures(torch.tensor([0.5, 0.0]), spans[:2], mask[:2]) == {}


def test_line_credit_names_a_registered_check(tiny_config):
    from llm_finetuning.session.checks import check_config

    assert check_config(tiny_config("grpo_training.line_credit=equal_to_answer")).grpo_training.line_credit
    with pytest.raises(ConfigError, match="unknown line check 'equal_to_answr'; did you mean equal_to_answer"):
        check_config(tiny_config("grpo_training.line_credit=equal_to_answr"))


def test_the_tiny_models_wrong_answers_lose_credit_only_from_their_first_wrong_line(tmp_path, tiny_config):
    from test_grpo_mechanisms import SHORT_GRPO

    from llm_finetuning.pipeline import RunOptions, run

    run(tiny_config(*SHORT_GRPO, "grpo_training.line_credit=equations"), RunOptions())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["phase"] == "grpo" and "loss" in record]
    assert len(steps) == 4
    credited = [record for record in steps if "line_credit/negative_tokens_freed" in record]
    assert credited, "no step had a wrong answer to credit"
    for record in credited:  # the one-line "a + b = c" workings of SIMPLE_SUMS: a wrong sum is located
        assert 0.0 <= record["line_credit/negative_tokens_freed"] < 1.0
        assert 0.0 <= record["line_credit/negative_rows_located"] <= 1.0
