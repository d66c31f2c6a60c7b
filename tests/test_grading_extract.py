"""Answer extraction, shared by completions, gold answers and the data layer: slots, runs of boxes,
answer phrases, sentences and math delimiters in a slot, numbers."""

import pytest

from llm_finetuning.grading import extract_answer, gold_answer, grade
from llm_finetuning.grading.extract import (
    answer_slot,
    boxed_run,
    final_answers,
    first_number,
    is_numeric,
    last_boxed,
    parse_number,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the answer is $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
        (r"\boxed{1} and later \boxed{x^{2}+1}", "x^{2}+1"),
        (r"\boxed 5", "5"),
        (r"\boxed 5$.", "5"),
        (r"\boxed {7}", "7"),
        (r"\fbox{7}", "7"),
        (r"\boxed{\sqrt{\frac{a}{b}}}", r"\sqrt{\frac{a}{b}}"),
        (r"\boxed{\boxed{4}}", "4"),
        (r"\boxed{unbalanced", None),
        (r"\boxed{}", None),
        ("no box here", None),
    ],
)
def test_last_boxed_takes_the_last_box_with_nested_braces(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "run"),
    [
        (r"$\boxed{4}, \boxed{7}$", ["4", "7"]),
        (r"$\boxed{1}$, $\boxed{2}$ and $\boxed{3}$", ["1", "2", "3"]),
        (r"\boxed{(1, 5)} \text{ and } \boxed{(5, 1)}", ["(1, 5)", "(5, 1)"]),
        (r"$x = \boxed{2}$ or $x = \boxed{-1}$", ["2", "-1"]),
        (r"\boxed{2} \quad \boxed{3}", ["2", "3"]),
        (r"first \boxed{3}. Checking again, the total is \boxed{5}", ["5"]),
        (r"\boxed{3}\n\nWait, recount: \boxed{5}", ["5"]),
        (r"\boxed{4} \boxed{7", None),
    ],
)
def test_a_run_of_boxes_is_the_boxes_only_connectors_separate(text, run):
    assert boxed_run(text) == run


@pytest.mark.parametrize(
    ("slot", "answers"),
    [
        (r"Answer \[ 14 \]", ["14"]),
        ("The result is 36.", ["36"]),
        (r"Hence $y \leq 4$ is the answer.", [r"y \leq 4"]),
        ("$$ 14 $$", ["14"]),
        (r"\( 14 \)", ["14"]),
        ("**Answer:** 42", ["42"]),
        ("The solutions are $x = 2$ and $x = -3$.", ["x = 2, x = -3"]),
        ("So we get $x = 5$.", ["x = 5"]),
        ("Final answer:\n\n$$\n7\n$$", ["7"]),
        ("The answer is 5 cm.", ["5 cm"]),
        (r"\text{Monday}", [r"\text{Monday}"]),
        ("x = 2 or x = 3", ["x = 2 or x = 3"]),
        ("72.", ["72"]),
        ("She has 17 marbles left.", ["17"]),  # one value in the statement
        ("The polygon has eight sides.", ["eight"]),
        ("I am not sure, maybe 7", ["I am not sure, maybe 7"]),  # a hedge states no answer
        ("Total: $56", ["$56"]),
        ("There are 4 red balls and 6 blue balls, so 10 balls in total.", ["10"]),
        (r"The minimum is $2\sqrt{2}$, attained at $x = \sqrt{2}$.", [r"2\sqrt{2}"]),
        ("The number of lattice points is **12**.", ["12"]),
        ("Answer: The value of x is 12.", ["12"]),
        ("The correct option is **(B)**.", ["(B)"]),
        ("", []),
    ],
)
def test_a_slot_holding_a_sentence_or_math_delimiters_gives_its_answer(slot, answers):
    assert final_answers(slot, in_slot=True) == answers


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("The result is 36.", None),  # no slot and no marker: never the last number of a text
        ("The answer is: 27", "27"),
        ("Final Answer: The final answer is $14$. I hope it is correct.", "14"),
        ("work\n#### 1,234\n", "1,234"),
        (r"roots $\boxed{4}, \boxed{7}$", "4, 7"),
        ("<SOLUTION>The result is 36.</SOLUTION>", "36"),
        ("<SOLUTION>36", None),
    ],
)
def test_outside_a_slot_only_explicit_markers_count(completion, expected):
    assert extract_answer(completion) == expected


@pytest.mark.parametrize(
    ("text", "answers"),
    [
        (
            r"<think>First guess \boxed{12}; no: 24.</think> There are $3 \cdot 4 \cdot 2 = 24$ outfits.",
            [r"3 \cdot 4 \cdot 2 = 24"],
        ),
        ("reasoning without its opening tag</think>\n\n**Answer:** 24", ["24"]),
        (r"<think>so far 4 \cdot 3 \cdot 2 = 24", []),  # still reasoning when it was cut off
        ("<think>done</think>\n<answer>59</answer>", ["59"]),  # a whole tagged completion in a slot
        ("<think>done</think>\n<answer>59", []),
    ],
)
def test_a_reasoning_block_is_passed_over_and_an_unclosed_one_holds_no_answer(text, answers):
    assert final_answers(text, in_slot=True) == answers


@pytest.mark.parametrize(
    ("text", "answers"),
    [
        (r"So the answer is $\boxed{120}$. Wait: $720/12 = 60$. So the answer is actually 60.", ["60"]),
        (r"The answer is $\boxed{60}$. I hope the answer is correct.", ["60"]),  # no value: the box stands
        (r"The final answer is $\boxed{60}$.", ["60"]),
    ],
)
def test_an_answer_statement_after_the_last_box_overrides_it_when_it_states_a_value(text, answers):
    assert final_answers(text, in_slot=False) == answers


WORKED = "We multiply the counts for each position and get $4 \\times 3 \\times 2 = 24$ so far. "


@pytest.mark.parametrize(
    ("slot", "answers"),
    [
        (WORKED + "Next we must subtract the arrangements where the two vowels sit together, which", []),
        (WORKED + "That is the number of arrangements we wanted to count.", ["4 \\times 3 \\times 2 = 24"]),
    ],
)
def test_a_worked_solution_that_stops_mid_sentence_states_no_answer(slot, answers):
    assert final_answers(slot, in_slot=True) == answers


def test_answer_slot_prefers_the_configured_tags_and_refuses_a_cut_off_slot():
    assert answer_slot("<ans>4</ans><answer>5</answer>", "<ans>", "</ans>") == ("4", True)
    assert answer_slot("<answer>5</answer>", "<ans>", "</ans>") == ("5", True)
    assert answer_slot("<ans>4", "<ans>", "</ans>") is None
    assert answer_slot("no tags", "<ans>", "</ans>") == ("no tags", False)


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        (r"$\boxed{7}$ and $\boxed{4}$", "4, 7", True),  # the gold lists several: a set
        (r"$\boxed{4}, \boxed{7}, \boxed{9}$", "4, 7", False),
        (r"$\boxed{4}, \boxed{7}$", "7", True),  # one gold answer: the run's last box
        (r"$\boxed{7}, \boxed{4}$", "7", False),
        (r"$a = \boxed{3}$ and $b = \boxed{5}$", "(3, 5)", True),  # a tuple of that length: in order
        (r"$a = \boxed{5}$ and $b = \boxed{3}$", "(3, 5)", False),
    ],
)
def test_a_run_of_boxes_is_a_set_when_the_gold_lists_several_and_its_last_box_otherwise(
    completion, gold, expected
):
    assert grade(completion, gold) is expected


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("72", "72"),
        ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
        (r"Half of it: $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
        (r"$\boxed{1}$ and $\boxed{2}$", "1, 2"),
        ("$x = 3$", "x = 3"),
        ("", None),
    ],
)
def test_gold_texts_are_reduced_by_the_same_rules(gold, answer):
    assert gold_answer(gold) == answer


def test_numbers():
    assert first_number("so x = 1,234.5 and 7") == 1234.5
    assert first_number("no digits") is None
    assert [parse_number(t) for t in ("1,234", "-0.5", "3e4", "nan", "inf", r"\frac12", "")] == [
        1234.0,
        -0.5,
        30000.0,
        None,
        None,
        None,
        None,
    ]
    assert is_numeric("1,234") and not is_numeric("1e999999")
