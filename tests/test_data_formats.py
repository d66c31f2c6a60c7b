"""Schema adapters without a tokenizer: answer extraction, format detection, and the columns each needs."""

from __future__ import annotations

import pytest

from llm_finetuning.config import DatasetSpec
from llm_finetuning.data.formats import ADAPTERS, detect_format, is_numeric, last_boxed, resolve_adapter
from llm_finetuning.errors import DataError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the answer is $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
        (r"\boxed{1} and later \boxed{x^{2}+1}", "x^{2}+1"),
        (r"\boxed 5", "5"),
        (r"\fbox{7}", "7"),
        (r"\boxed{\sqrt{\frac{a}{b}}}", r"\sqrt{\frac{a}{b}}"),
        (r"\boxed{unbalanced", None),
        (r"\boxed{}", None),
        ("no box here", None),
    ],
)
def test_last_boxed_takes_the_last_box_with_nested_braces(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("answer", "numeric"),
    [("1,234", True), ("-0.5", True), ("3e4", True), (r"\frac{1}{2}", False), ("nan", False), ("", False)],
)
def test_is_numeric(answer, numeric):
    assert is_numeric(answer) is numeric


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (["problem", "generated_solution", "expected_answer", "problem_type"], "openmathreasoning"),
        (["prompt", "solution", "data_source"], "dapo"),
        (["question", "answer"], "gsm8k"),
        (["problem", "solution", "level", "type"], "math"),
        (["problem", "solution", "answer", "subject", "level", "unique_id"], "math"),
        (["problem", "solution", "messages"], "numina"),
        (["question", "answer", "solution", "split", "kind", "operations", "operands"], "synthetic"),
        (["text"], None),
    ],
)
def test_auto_detection_from_columns(columns, expected):
    assert detect_format(columns) == expected


@pytest.mark.parametrize(
    ("name", "row", "question", "answer", "reasoning", "metadata"),
    [
        (
            "gsm8k",
            {"question": "Q?", "answer": "10 * 123.4 = <<10*123.4=1234>>1234\n#### 1,234"},
            "Q?",
            "1234",
            "10 * 123.4 = 1234",
            {"reference_solution": "10 * 123.4 = <<10*123.4=1234>>1234\n#### 1,234"},
        ),
        ("gsm8k", {"question": "Q?", "answer": "no marker"}, "Q?", None, "no marker", None),
        (
            "math",
            {
                "problem": "P",
                "solution": r"Half: $\boxed{\frac{1}{2}}$",
                "level": "Level 3",
                "type": "Algebra",
            },
            "P",
            r"\frac{1}{2}",
            r"Half: $\boxed{\frac{1}{2}}$",
            {"reference_solution": r"Half: $\boxed{\frac{1}{2}}$", "level": "Level 3", "subject": "Algebra"},
        ),
        (  # MATH-500 carries its own answer column, which wins over the box
            "math",
            {
                "problem": "P",
                "solution": r"\boxed{0.5}",
                "answer": r"\frac12",
                "subject": "Algebra",
                "level": 2,
            },
            "P",
            r"\frac12",
            r"\boxed{0.5}",
            {"reference_solution": r"\boxed{0.5}", "level": "2", "subject": "Algebra"},
        ),
        ("dapo", {"prompt": "P", "solution": "34"}, "P", "34", None, {}),
        (
            "openmathreasoning",
            {"problem": "P", "generated_solution": "<think>\nwork\n</think>", "expected_answer": "7"},
            "P",
            "7",
            "work",
            {},
        ),
        (
            "numina",
            {"problem": "P", "solution": r"so \boxed{12}", "messages": []},
            "P",
            "12",
            r"so \boxed{12}",
            {"reference_solution": r"so \boxed{12}"},
        ),
    ],
)
def test_adapters_read_each_schema(name, row, question, answer, reasoning, metadata):
    problem = ADAPTERS[name].convert(row, DatasetSpec())
    assert (problem.question, problem.answer, problem.reasoning) == (question, answer, reasoning)
    if metadata is not None:
        assert problem.metadata == metadata


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("42", "42"), (r"it is \boxed{42}", "42"), ("work\n#### 1,000", "1000"), ("", None)],
)
def test_columns_format_maps_the_configured_columns(answer, expected):
    spec = DatasetSpec(format="columns", question_column="q", answer_column="a", solution_column="s")
    problem = ADAPTERS["columns"].convert({"q": "Q", "a": answer, "s": "steps"}, spec)
    assert (problem.question, problem.answer, problem.reasoning) == ("Q", expected, "steps")


@pytest.mark.parametrize(
    ("spec", "columns", "message"),
    [
        (
            DatasetSpec(name="d.jsonl", format="gsm8k"),
            ["question", "solution"],
            "d.jsonl: format 'gsm8k' needs columns ['answer'] but the dataset has ['question', 'solution']",
        ),
        (
            DatasetSpec(name="d.csv", format="columns", question_column="q", answer_column="a"),
            ["q", "b"],
            "format 'columns' needs columns ['a'] but the dataset has ['q', 'b']; set question_column",
        ),
        (DatasetSpec(name="d.csv"), ["text"], "cannot tell the dataset format from its columns ['text']"),
    ],
)
def test_missing_columns_name_what_is_there_and_what_is_needed(spec, columns, message):
    with pytest.raises(DataError) as caught:
        resolve_adapter(spec, columns)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
