"""The offline generator: deterministic, correct working, held-out problems disjoint from training in every mode."""

from __future__ import annotations

import re

import pytest
from conftest import TINY_YAML

from llm_finetuning.config import ConfigError, DatasetSpec, PipelineConfig, SyntheticDataConfig
from llm_finetuning.data import DatasetLoader, generate_arithmetic, tokenizer_corpus
from llm_finetuning.data.synthetic import heldout_pairings
from llm_finetuning.tasks.workings import column_working

SMALL = {"num_train": 600, "num_eval": 60}
MODES = ["tuples", "wording", "both"]


def split(rows) -> tuple[list[dict], list[dict]]:
    rows = list(rows)
    return [r for r in rows if r["split"] == "train"], [r for r in rows if r["split"] == "eval"]


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_rows_other_seed_other_rows(mode):
    cfg = SyntheticDataConfig(**SMALL, heldout_by=mode)
    assert generate_arithmetic(cfg, 5).to_dict() == generate_arithmetic(cfg, 5).to_dict()
    assert generate_arithmetic(cfg, 5)["question"] != generate_arithmetic(cfg, 6)["question"]


@pytest.mark.parametrize("mode", MODES)
def test_counts_and_distinct_held_out_questions_disjoint_from_training(mode):
    train, heldout = split(generate_arithmetic(SyntheticDataConfig(**SMALL, heldout_by=mode), 0))
    assert (len(train), len(heldout)) == (600, 60)
    assert len({r["question"] for r in heldout}) == 60
    assert not {r["question"] for r in heldout} & {r["question"] for r in train}


def test_tuples_mode_holds_out_whole_operand_tuples():
    train, heldout = split(generate_arithmetic(SyntheticDataConfig(**SMALL), 0))
    key = lambda r: (tuple(r["operands"]), r["operations"])
    assert not {key(r) for r in heldout} & {key(r) for r in train}


def test_wording_mode_holds_out_name_item_pairings_and_shares_the_facts():
    train, heldout = split(generate_arithmetic(SyntheticDataConfig(**SMALL, heldout_by="wording"), 0))
    pairings = heldout_pairings(0)
    assert 1 <= len(pairings) <= 8  # about 20 % of the 36 pairings
    assert all(r["kind"] == "word" for r in heldout)
    assert all(
        any(q.startswith(f"{n} has ") and f" {i}" in q for n, i in pairings) for q in _questions(heldout)
    )
    for question in _questions(train):
        assert not any(question.startswith(f"{n} has ") and f" {i}." in question for n, i in pairings), (
            question
        )
    assert {r["kind"] for r in train} == {"word", "bare"}
    facts = {(tuple(r["operands"]), r["operations"]) for r in train}
    assert all((tuple(r["operands"]), r["operations"]) in facts for r in heldout)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_demo_held_out_problems_are_unseen_operand_pairs_in_unseen_stories(seed):
    """The demo's own data: no held-out pair of operands occurs in training in either order, and no held-out
    question's (name, item) story pairing does either, so every held-out problem is new arithmetic, newly worded."""
    cfg = PipelineConfig.from_yaml(TINY_YAML, [f"data.seed={seed}"]).data.synthetic
    train, heldout = split(generate_arithmetic(cfg, seed))
    assert len(heldout) >= 200 and len(train) >= 1000
    pair = lambda r: (tuple(sorted(r["operands"])), r["operations"])
    assert not {pair(r) for r in heldout} & {pair(r) for r in train}
    story = lambda question: re.match(r"(\w+) has \d+ (\w+)\.", question).groups()  # (name, item)
    assert all(r["kind"] == "word" for r in heldout)
    held_stories = {story(r["question"]) for r in heldout}
    train_stories = {story(r["question"]) for r in train if r["kind"] == "word"}
    assert held_stories <= heldout_pairings(seed) and not held_stories & train_stories


def test_demo_working_goes_column_by_column_and_ends_with_the_answer():
    cfg = PipelineConfig.from_yaml(TINY_YAML).data.synthetic
    for row in generate_arithmetic(cfg, 0).select(range(300)):
        *columns, last = row["solution"].splitlines()
        a, b = row["operands"]
        assert last == f"={row['answer']}" and int(row["answer"]) == a + b
        assert len(columns) == max(len(str(a)), len(str(b)))
        carry = 0
        for x, y, line in zip(str(a).zfill(9)[::-1], str(b).zfill(9)[::-1], columns):
            total = int(x) + int(y) + carry
            assert line == f"{x}+{y}+{carry}={total:02d}", (row["solution"], line)
            carry = total // 10


@pytest.mark.parametrize(
    ("a", "op", "b", "working"),
    [
        (47, "+", 38, ["7+8+0=15", "4+3+1=08", "=85"]),
        (99, "+", 1, ["9+1+0=10", "9+0+1=10", "=100"]),
        (52, "-", 38, ["12-8-0=4", "5-3-1=1", "=14"]),
        (100, "-", 1, ["10-1-0=9", "10-0-1=9", "1-0-1=0", "=99"]),
        (7, "-", 7, ["7-7-0=0", "=0"]),
    ],
)
def test_column_working_spells_every_digit_and_carry(a, op, b, working):
    assert column_working(a, op, b) == working


def test_column_working_chains_operations():
    cfg = SyntheticDataConfig(num_train=200, num_eval=5, operations=["+", "-"], num_operations=2,
                              max_operand=99, working="columns")
    for row in generate_arithmetic(cfg, 0):
        results = [line for line in row["solution"].splitlines() if line.startswith("=")]
        assert len(results) == 2 and results[-1] == f"={row['answer']}"


def test_heldout_pairings_are_seeded():
    assert heldout_pairings(0) == heldout_pairings(0)
    assert heldout_pairings(0) != heldout_pairings(1)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"operations": ["+"], "min_operand": 0, "max_operand": 9}, lambda a, b: a + b),
        ({"operations": ["-"], "min_operand": 0, "max_operand": 9}, lambda a, b: a - b),
        ({"operations": ["*"], "min_operand": 0, "max_operand": 9}, lambda a, b: a * b),
    ],
)
def test_answers_and_working_are_right(settings, expected):
    rows = generate_arithmetic(SyntheticDataConfig(num_train=200, num_eval=5, **settings), 0)
    for row in rows:
        a, b = row["operands"]
        assert int(row["answer"]) == expected(a, b) >= 0
        assert row["solution"] == f"{a} {row['operations']} {b} = {row['answer']}"


def test_two_operations_work_left_to_right_and_bracket_the_bare_question():
    cfg = SyntheticDataConfig(
        num_train=300, num_eval=10, operations=["+", "*"], num_operations=2, max_operand=9
    )
    for row in generate_arithmetic(cfg, 0):
        (a, b, c), (op1, op2) = row["operands"], row["operations"].split()
        first = a + b if op1 == "+" else a * b
        assert int(row["answer"]) == (first + c if op2 == "+" else first * c)
        assert row["solution"].splitlines()[1].startswith(f"{first} {op2} {c} = ")
        if row["kind"] == "bare" and (op1, op2) == ("+", "*"):
            assert row["question"] == f"What is ({a} + {b}) * {c}?"


def test_loader_caps_training_rows_and_keeps_every_held_out_row():
    cfg = SyntheticDataConfig(**SMALL, heldout_by="wording")
    rows = DatasetLoader(
        DatasetSpec(name="synthetic:arithmetic", max_samples=50), seed=0, synthetic=cfg
    ).load()
    train, heldout = split(rows)
    assert (len(train), len(heldout)) == (50, 60)


def test_tokenizer_corpus_holds_no_held_out_question():
    cfg = SyntheticDataConfig(**SMALL, heldout_by="wording")
    _, heldout = split(generate_arithmetic(cfg, 0))
    assert not set(_questions(heldout)) & set(tokenizer_corpus(cfg, 0))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.synthetic.heldout_by=words", "data.synthetic.heldout_by: expected one of tuples, wording"),
        ("data.synthetic.max_operand=-1", "max_operand: must be >= min_operand"),
        ("data.synthetic.operations=['/']", 'operations: use "+", "-", "*"'),
        ("data.synthetic.eval_fraction_of_tuples=0", "must be > 0 when num_eval > 0"),
        ("data.synthetic.working=digits", "data.synthetic.working: expected one of lines, columns"),
        ("data.synthetic.operations=['*'] data.synthetic.working=columns", 'columns work "+" and "-" only'),
        ("data.synthetic.min_operand=-5 data.synthetic.working=columns", "columns work non-negative numbers"),
    ],
)
def test_bad_settings_are_config_errors(override, message):
    with pytest.raises(ConfigError) as caught:
        PipelineConfig.from_dict({}).with_overrides(override.split())
    assert message in str(caught.value)


def test_heldout_by_is_validated_when_built_directly():
    with pytest.raises(ConfigError, match='heldout_by: must be "tuples", "wording" or "both"'):
        SyntheticDataConfig(heldout_by="words")  # type: ignore[arg-type]


def test_wording_mode_needs_no_held_out_tuples():
    cfg = SyntheticDataConfig(**SMALL, heldout_by="wording", eval_fraction_of_tuples=0)
    assert len(split(generate_arithmetic(cfg, 0))[1]) == 60


def _questions(rows) -> list[str]:
    return [r["question"] for r in rows]
