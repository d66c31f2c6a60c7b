"""Schema adapters without a tokenizer: answer extraction, format detection, the columns each needs,
and real files in tests/data (an eval file, DAPO rows, a local copy of hendrycks_math)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_finetuning.config import DatasetSpec
from llm_finetuning.data import DatasetLoader
from llm_finetuning.data.formats import ADAPTERS, detect_format, resolve_adapter
from llm_finetuning.errors import DataError


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
        (["problem", "answer", "subject"], "math"),
        (["problem", "answer", "subject", "level", "unique_id"], "math"),
        (["question", "answer", "subject", "level"], "gsm8k"),
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
        ("gsm8k", {"question": "Q?", "answer": "step one\nstep two"}, "Q?", None, None, None),
        ("gsm8k", {"question": "Q?", "answer": "no final answer marker"}, "Q?", None, None, None),
        ("gsm8k", {"question": "Q?", "answer": "Monday"}, "Q?", "Monday", None, None),
        (  # a question/answer table: a bare answer on one line, no worked solution
            "gsm8k",
            {"question": "Q?", "answer": "1,234", "subject": "Algebra", "level": 3},
            "Q?",
            "1234",
            None,
            {"reference_solution": "1,234", "subject": "Algebra", "level": "3"},
        ),
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
            {"reference_solution": r"Half: $\boxed{\frac{1}{2}}$", "level": "3", "subject": "Algebra"},
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


DATA = Path(__file__).parent / "data"


def problems(name: str, **spec_fields):
    spec = DatasetSpec(name=str(DATA / name), **spec_fields)
    raw = DatasetLoader(spec, seed=0).load()
    adapter = resolve_adapter(spec, raw.column_names)
    rows = sorted(raw, key=lambda row: str(row.get("problem") or row.get("question") or row.get("prompt")))
    return adapter.name, [adapter.convert(row, spec) for row in rows]


def test_an_eval_file_with_problem_and_answer_columns_is_read_with_its_breakdowns():
    name, found = problems("eval_problem_answer.jsonl")  # MATH-500-like: problem, answer, subject, level
    assert name == "math"
    assert [p.answer for p in found] == ["56", "-1, 3", "4", r"\frac{\pi}{4}"]
    assert [p.metadata for p in found][:2] == [
        {"level": "2", "subject": "Counting & Probability"},
        {"level": "3", "subject": "Algebra"},
    ]
    assert all(p.reasoning is None for p in found)


def test_an_eval_file_with_question_and_answer_columns_is_read():
    name, found = problems("eval_question_answer.csv")
    assert name == "gsm8k"
    assert [(p.question[:12], p.answer, p.reasoning) for p in found] == [
        ("A train trav", "80", None),
        ("How many min", "1440", None),
        ("What is 12 t", "144", None),
    ]


def test_math_levels_read_the_same_from_hendrycks_copies_and_math_500():
    _, hendrycks = problems("hendrycks_math", subset=["algebra", "geometry"], split="test")
    _, math500 = problems("eval_problem_answer.jsonl")
    assert {p.metadata["level"] for p in hendrycks} == {"1", "3", "?"}
    assert {p.metadata["level"] for p in math500} == {"1", "2", "3"}
    assert sorted(p.answer for p in hendrycks) == ["10", r"120^\circ", "5", "6"]


def test_dapo_prompts_lose_their_answer_instruction_unless_asked_to_keep_it():
    name, stripped = problems("dapo_sample.jsonl")
    _, kept = problems("dapo_sample.jsonl", keep_answer_instruction=True)
    assert name == "dapo"
    assert [p.answer for p in stripped] == ["2", "45", "58", "13", "97"]
    assert (
        stripped[2].question
        == "Let $x$ and $y$ be real numbers with $x + y = 10$ and $xy = 21$. Find $x^2 + y^2$."
    )
    assert not any("Answer:" in p.question or "step by step" in p.question for p in stripped)
    assert sum("Remember to put your answer on its own line" in p.question for p in kept) == 3
    assert [stripped[0].question, stripped[4].question] == [kept[0].question, kept[4].question]  # no wrapper


def test_the_data_layer_and_the_grader_read_gold_answers_with_the_same_function():
    from llm_finetuning.data import formats
    from llm_finetuning.grading import extract

    assert formats.last_boxed is extract.last_boxed and formats.is_numeric is extract.is_numeric
    row = {"question": "Q", "answer": r"so $\boxed{4}, \boxed{7}$"}
    spec = DatasetSpec(format="columns", question_column="question", answer_column="answer")
    assert ADAPTERS["columns"].convert(row, spec).answer == extract.gold_answer(row["answer"]) == "4, 7"
