"""The grader on answers rewritten in other people's conventions (``benchmarks/grader_conventions.py``):
decimal commas, thousands with LaTeX spaces, percent, chains, intervals as relations, several answers,
exact answers against rounded golds, answers past the end of the turn, numbers split over lines. Every
case, positive and near-miss negative, made from the gold answers in ``tests/data`` must get the verdict
docs/grader.md's rules give (the labelled examples of each class are in ``grader_cases.jsonl``,
``"source": "batch10"``)."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import pytest

from llm_finetuning.grading import grade, is_equivalent

_SPEC = importlib.util.spec_from_file_location(
    "grader_conventions", Path(__file__).parent.parent / "benchmarks" / "grader_conventions.py"
)
conventions = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(conventions)


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    return conventions.convention_cases(conventions.gold_answers())


def test_every_class_has_positives_and_negatives(cases):
    counts = collections.Counter((case["category"], case["expected"]) for case in cases)
    for name in conventions.CLASSES:
        assert counts[(name, True)] >= 10 and counts[(name, False)] >= 10, (name, counts)


def test_every_convention_case_gets_the_documented_verdict(cases):
    wrong = [case for case in cases if grade(case["completion"], case["gold"]) != case["expected"]]
    assert not wrong, f"{len(wrong)} of {len(cases)}: {wrong[:5]}"


RULES = {  # a rule of docs/grader.md: (answer, gold, verdict), positives and near misses
    "number conventions": [
        ("3,75", "3.75", True), ("12,5 km", "12.5", True), ("0,125", "0.125", True), ("3.75", "3,75", True),
        ("1,22", "1, 22", True), ("1,22", "(1, 22)", True),  # the gold lists two: a list
        ("1,22", "22", False), ("1,22", "122", False), ("3, 75", "3.75", False), ("3,750", "3.75", False),
        ("4,\\! 096", "4096", True), ("4,\\! 096", "4.096", False), ("3{,}75", "3.75", True),
        ("3{,}750", "3750", True), ("12cm", "12", True), ("12km", "12 m", False), ("3m", "3", False),
    ],
    "a rounded gold": [
        ("\\frac{2}{3}", "0.67", True), ("\\sqrt{27}", "5.196", True), ("\\pi", "3.14", True),
        ("(\\frac13, \\frac23)", "(0.33, 0.67)", True),
        ("\\frac{2}{3}", "0.66", False), ("\\frac{2}{3}", "0.7", False),  # truncated; one digit
        ("\\frac{99}{100}", "1.0", False), ("\\frac{1}{8}", "0.13", False),  # a terminating value is exact
        ("0.67", "\\frac23", False), ("3.14", "\\pi", False),  # a rounded answer is a rounding
        ("\\frac{2x}{3}", "0.67", False), ("(\\frac13, \\frac34)", "(0.33, 0.67)", False),
    ],
    "lines, lists and labels": [
        ("$$\n1234\n$$", "1234", True), ("$$\n1\n234\n$$", "1234", False), ("$$\n12\n345\n$$", "12345", False),
        ("11\n5/6", "\\frac{71}{6}", False), ("The values are\n$$\n12\n$$\nand\n$$\n13\n$$", "12, 13", True),
        ("The values are\n$$\n12\n$$\nand\n$$\n13\n$$", "13", False),
        ("1, 2, 3, \\ldots", "1, 2, 3", False), ("1, 2, 3, ...", "1, 2, 3", False),
        ("(3, 17), (17, 3), (3, 17)", "(17, 3), (3, 17)", True), ("(7,11),\\ (11,7)", "(11,7)or(7,11)", True),
        ("\\boxed{AB : BC : CA = 3 : 4 : 5}", "AB : BC : CA = 3 : 4 : 5", True), ("Ratio: 3:4", "3:4", True),
    ],
    "a count and its noun phrase": [
        ("So there are 12 ways to choose the three books.", "12", True),
        ("Therefore, there are 12 distinct sequences that meet the three given conditions.", "12", True),
        ("The road is 12 km long.", "12", True), ("The road is 12 km long.", "12 m", False),  # its unit kept
        ("The total is 12 apples and 3 pears.", "12", False), ("There are 12 or 13 ways.", "12", False),
        ("The answer is 12 times the radius.", "12", False), ("The result is 3 times 4.", "3", False),
        ("It appears 5 times in the list.", "5", True), ("It appears 5 times.", "5", True),
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "gold", "expected"),
    [pytest.param(*case, id=f"{rule}: {case[0][:30]} vs {case[1]}") for rule, cases in RULES.items() for case in cases],
)
def test_each_rule(answer, gold, expected):
    assert is_equivalent(answer, gold) is expected


@pytest.mark.parametrize(
    "after",
    [
        "<|im_end|>\n<|im_start|>user\nNext?<|im_end|>\n<|im_start|>assistant\n", "<｜end▁of▁sentence｜><｜User｜>Next?",
        "<｜Assistant｜>", "\n\nHuman: Next?\n\nAssistant: ", "\nUser: Next?\n", "\n\n### Instruction:\nNext?\n",
        " [INST] Next? [/INST] ", "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Next?",
        "<end_of_utterance>", "<|start|>user<|message|>Next?<|end|>",
    ],
)  # fmt: skip
def test_the_answer_is_the_one_before_the_turn_ended(after):
    completion = f"So the answer is $\\boxed{{7}}${after}$\\boxed{{9}}$"
    assert grade(completion, "7") and not grade(completion, "9")
    assert not grade(f"I am not sure.{after}$\\boxed{{7}}$", "7")  # a right answer after the turn earns nothing


