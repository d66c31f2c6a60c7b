"""Worked solutions the project writes for arithmetic: the columns style on literal chains, and on drawn chains every
step it writes is true arithmetic and its answer is the expression's value."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from llm_finetuning.tasks.workings import column_working, expression_working


def test_columns_work_each_operation_on_magnitudes_digit_by_digit():
    assert expression_working("44 - 84 + 75", style="columns").text.splitlines() == [
        "44 - 84 + 75",
        "44-84 = -(84-44): 4-4-0=0 8-4-0=4 =-40",  # a negative result: the larger minus the smaller, negated
        "-40 + 75",
        "-40+75 = 75-40: 5-0-0=5 7-4-0=3 =35",  # a negative number plus a larger one: a difference
        "35",
    ]
    assert expression_working("57 + 89 - 9", style="columns").text.splitlines() == [
        "57 + 89 - 9", "57+89: 7+9+0=16 5+8+1=14 =146", "146 - 9", "146-9: 16-9-0=7 4-0-1=3 1-0-0=1 =137", "137",
    ]  # fmt: skip


def test_one_digit_operations_are_written_without_columns():
    assert expression_working("5 - 9 - 7", style="columns").text.splitlines() == [
        "5 - 9 - 7", "5-9 = -(9-5) = -4", "-4 - 7", "-4-7 = -(4+7) = -11", "-11",
    ]  # fmt: skip
    assert expression_working("6 + 3", style="columns").text == "6 + 3\n6+3 = 9\n9"


def test_columns_keep_lines_for_what_is_not_a_flat_chain():
    assert expression_working("12 + 5 - 3 * 2", style="columns") == expression_working("12 + 5 - 3 * 2")


def test_column_working_writes_carries_and_borrows():
    assert column_working(47, "+", 38) == ["7+8+0=15", "4+3+1=08", "=85"]
    assert column_working(52, "-", 38) == ["12-8-0=4", "5-3-1=1", "=14"]
    assert column_working(100, "-", 98) == ["10-8-0=2", "10-9-1=0", "1-0-1=0", "=2"]


STEP = re.compile(r"^(\d+)([+-])(\d+)([+-])(\d)=(\d+)$")


@given(st.lists(st.integers(0, 999), min_size=1, max_size=7), st.lists(st.sampled_from("+-"), min_size=6, max_size=6))
def test_every_column_step_is_true_and_the_working_reaches_the_value(terms, signs):
    expression = " ".join([str(terms[0]), *(f"{sign} {term}" for sign, term in zip(signs, terms[1:]))])
    working = expression_working(expression, style="columns")
    value = terms[0] + sum(term if sign == "+" else -term for sign, term in zip(signs, terms[1:]))
    assert working.answer == str(value) and working.text.splitlines()[-1] == str(value)
    for step in re.findall(r"\d+[+-]\d+[+-]\d=\d+", working.text):
        x, op, y, _, carry, result = STEP.match(step).groups()
        assert int(result) == (int(x) + int(y) + int(carry) if op == "+" else int(x) - int(y) - int(carry))
        assert 0 <= int(result) <= 19
