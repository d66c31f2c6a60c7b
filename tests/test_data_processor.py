"""Small files in each real schema, loaded and processed with the tiny tokenizer, checked field by field.

Also: the percentile length rule on crafted lengths, the seeded split, and the empty-stage errors with counts.
"""

from __future__ import annotations

import pytest

from llm_finetuning.config import DatasetSpec, PipelineConfig, PromptConfig
from llm_finetuning.data import DatasetLoader, DatasetProcessor
from llm_finetuning.data.lengths import length_limits
from llm_finetuning.errors import DataError

PROMPT = PromptConfig()
TAGS = [PROMPT.reasoning_start, PROMPT.reasoning_end, PROMPT.solution_start, PROMPT.solution_end]

OMR = [
    {
        "problem": "What is 2 + 3?",
        "generated_solution": "<think>\n2 + 3 = 5\n</think>",
        "expected_answer": "5",
    },
    {"problem": "Simplify x/x.", "generated_solution": "It is one.", "expected_answer": "x^0"},
]
DAPO = [{"prompt": "Find 6 * 7.", "solution": "42", "data_source": "dapo"}]
GSM8K = [
    {
        "question": "Ann has 1,000 pens and buys 234.",
        "answer": "1000 + 234 = <<1000+234=1234>>1234\n#### 1,234",
    },
    {"question": "Broken row.", "answer": "no final answer marker"},
]
MATH = [
    {
        "problem": "Compute 1/2.",
        "solution": r"It is $\boxed{\frac{1}{2}}$.",
        "level": "Level 2",
        "type": "Prealgebra",
    }
]
NUMINA = [
    {
        "problem": "Add 4 and 8.",
        "solution": r"4 + 8 = 12, so $\boxed{12}$.",
        "messages": [{"role": "user", "content": "Add 4 and 8."}],
    }
]


@pytest.fixture
def tokenizer(tiny_tokenizer):
    return tiny_tokenizer


def config(split: float = 0.9, **data) -> PipelineConfig:
    data = {"seed": 0, "prompt_length_percentile": 100.0, **data}
    grpo = {"train_validation_split": split}
    return PipelineConfig.from_dict({"model": {"max_seq_length": 512}, "data": data, "grpo_training": grpo})


def write(rows: list[dict], path) -> str:
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    {"jsonl": dataset.to_json, "parquet": dataset.to_parquet, "csv": dataset.to_csv}[path.suffix[1:]](
        str(path)
    )
    return str(path)


def load(rows, path, **spec) -> tuple[DatasetSpec, object]:
    spec = DatasetSpec(name=write(rows, path), **spec)
    return spec, DatasetLoader(spec, seed=0).load()


def grpo_rows(tokenizer, rows, path, cfg=None, **spec) -> list[dict]:
    spec, raw = load(rows, path, **spec)
    data = DatasetProcessor(cfg or config(), tokenizer).grpo_dataset(raw, spec)
    assert data.validation is None or len(data.validation) + len(data.train) == data.stats["length_filtered"]
    rows = list(data.train) + (list(data.validation) if data.validation is not None else [])
    return sorted(rows, key=lambda row: row["prompt"][1]["content"])


def test_gsm8k_csv_answer_drops_thousands_separators_and_keeps_the_solution(tokenizer, tmp_path):
    (row,) = grpo_rows(tokenizer, GSM8K, tmp_path / "gsm8k.csv", config(split=1.0))
    assert row["prompt"] == [
        {"role": "system", "content": PROMPT.system_prompt},
        {"role": "user", "content": "Ann has 1,000 pens and buys 234."},
    ]
    assert row["answer"] == "1234"
    assert row["reference_solution"] == GSM8K[0]["answer"]


def test_math_jsonl_answer_is_the_nested_box_and_metadata_is_kept(tokenizer, tmp_path):
    (row,) = grpo_rows(tokenizer, MATH, tmp_path / "math.jsonl")
    assert row["prompt"][1]["content"] == "Compute 1/2."
    assert (row["answer"], row["level"], row["subject"]) == (r"\frac{1}{2}", "2", "Prealgebra")


def test_dapo_parquet_solution_becomes_answer(tokenizer, tmp_path):
    (row,) = grpo_rows(tokenizer, DAPO, tmp_path / "dapo.parquet")
    assert set(row) == {"prompt", "answer"}
    assert (row["prompt"][1]["content"], row["answer"]) == ("Find 6 * 7.", "42")


def test_numina_parquet_answer_from_the_box(tokenizer, tmp_path):
    (row,) = grpo_rows(tokenizer, NUMINA, tmp_path / "numina.parquet")
    assert (row["answer"], row["reference_solution"]) == ("12", NUMINA[0]["solution"])


def test_columns_format_reads_the_configured_columns(tokenizer, tmp_path):
    rows = [{"q": "Two plus two?", "a": "4", "id": 1}]
    (row,) = grpo_rows(
        tokenizer, rows, tmp_path / "own.csv", format="columns", question_column="q", answer_column="a"
    )
    assert (row["prompt"][1]["content"], row["answer"]) == ("Two plus two?", "4")


def test_openmathreasoning_sft_completion_carries_the_four_tags_in_order(tokenizer, tmp_path):
    spec, raw = load(OMR, tmp_path / "omr.jsonl")
    (row,) = DatasetProcessor(config(), tokenizer).sft_dataset(raw, spec)  # x^0 is not numeric: dropped
    assert row["prompt"][1] == {"role": "user", "content": "What is 2 + 3?"}
    # The generation prompt prefills reasoning_start, so the completion starts with the reasoning itself.
    assert row["completion"] == [
        {"role": "assistant", "content": "2 + 3 = 5<end_working_out><SOLUTION>5</SOLUTION>"}
    ]
    text = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
    positions = [text.index(tag) for tag in TAGS]
    assert positions == sorted(positions)
    assert "<think>" not in text


def test_sft_keeps_non_numeric_answers_when_asked(tokenizer, tmp_path):
    spec, raw = load(OMR, tmp_path / "omr.parquet")
    rows = DatasetProcessor(config(numeric_answers_only=False), tokenizer).sft_dataset(raw, spec)
    assert sorted(row["completion"][0]["content"].split("<SOLUTION>")[1] for row in rows) == [
        "5</SOLUTION>",
        "x^0</SOLUTION>",
    ]


def test_sft_refuses_a_schema_without_solutions(tokenizer, tmp_path):
    spec, raw = load(DAPO, tmp_path / "dapo.jsonl")
    with pytest.raises(DataError, match="format 'dapo' has no worked solutions"):
        DatasetProcessor(config(), tokenizer).sft_dataset(raw, spec)


@pytest.mark.parametrize(
    ("rows", "suffix", "cfg", "phase", "message"),
    [
        (
            GSM8K[1:] * 3,
            "csv",
            {},
            "grpo",
            "no rows left after the answer_found stage (counts: loaded=3, parsed=3, answer_found=0)",
        ),
        (
            OMR[1:] * 2,
            "jsonl",
            {},
            "sft",
            (
                "numeric_answer stage (counts: loaded=2, parsed=2, answer_found=2, reasoning_found=2, "
                "numeric_answer=0); no answer is a number: set data.numeric_answers_only: false"
            ),
        ),
        (
            OMR[:1],
            "jsonl",
            {"sft_max_length_fraction": 0.01},
            "sft",
            (
                "length_filtered stage (counts: loaded=1, parsed=1, answer_found=1, reasoning_found=1, "
                "numeric_answer=1, length_filtered=0); every example is too long"
            ),
        ),
    ],
)
def test_empty_after_a_stage_gives_the_counts_at_every_stage(
    tokenizer, tmp_path, rows, suffix, cfg, phase, message
):
    spec, raw = load(rows, tmp_path / f"data.{suffix}")
    processor = DatasetProcessor(config(**cfg), tokenizer)
    with pytest.raises(DataError) as caught:
        getattr(processor, f"{phase}_dataset")(raw, spec)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_rows_without_an_answer_are_dropped_and_counted(tokenizer, tmp_path):
    spec, raw = load(GSM8K, tmp_path / "gsm8k.jsonl")
    data = DatasetProcessor(config(), tokenizer).grpo_dataset(raw, spec)
    assert data.stats == {
        "loaded": 2,
        "parsed": 2,
        "answer_found": 1,
        "length_filtered": 1,
        "train": 1,
        "validation": 0,
    }


@pytest.mark.parametrize(
    ("lengths", "percentile", "expected"),
    [
        (range(1, 11), 90, (9, 10, 54)),  # 9.1 -> 9: nine of ten kept
        ([5] * 15 + [40] * 5, 75, (13, 14, 50)),  # 5 + 0.25 * 35 = 13.75 -> 13: the fifteen 5s kept
        ([7] * 4, 50, (7, 8, 56)),
    ],
)
def test_length_limits_percentile_rule(lengths, percentile, expected):
    limits = length_limits(list(lengths), percentile=percentile, max_seq_length=64)
    assert (limits.keep_at_most, limits.max_prompt_length, limits.max_completion_length) == expected


@pytest.mark.parametrize(
    ("explicit", "expected"),
    [
        ({"max_prompt_length": 20}, (20, 20, 44)),
        ({"max_completion_length": 30}, (9, 10, 30)),
        ({"max_completion_length": 60}, (3, 4, 60)),  # prompt budget capped so the sum fits max_seq_length
    ],
)
def test_length_limits_explicit_settings(explicit, expected):
    limits = length_limits(list(range(1, 11)), percentile=90, max_seq_length=64, **explicit)
    assert (limits.keep_at_most, limits.max_prompt_length, limits.max_completion_length) == expected


def test_length_limits_without_room_for_completions():
    with pytest.raises(DataError, match="no room in model.max_seq_length = 64"):
        length_limits([70], percentile=90, max_seq_length=64)


def test_percentile_filter_on_crafted_prompt_lengths(tokenizer, tmp_path):
    """Questions of 1..20 digits: the tokenizer splits digits, so prompt lengths are base + 1 .. base + 20."""
    rows = [{"q": "7" * k, "a": str(k)} for k in range(1, 21)]
    cfg = config(split=1.0, prompt_length_percentile=80.0)
    spec, raw = load(
        rows, tmp_path / "digits.jsonl", format="columns", question_column="q", answer_column="a"
    )
    data = DatasetProcessor(cfg, tokenizer).grpo_dataset(raw, spec)
    base = _prompt_length(tokenizer, "7") - 1
    assert [_prompt_length(tokenizer, "7" * k) - base for k in (1, 5, 20)] == [1, 5, 20]
    # np.percentile(base + 1..base + 20, 80) = base + 16.2 -> base + 16: 16 of 20 prompts (80 %) kept.
    assert sorted(int(answer) for answer in data.train["answer"]) == list(range(1, 17))
    assert data.stats["length_filtered"] == 16
    assert data.max_prompt_length == base + 16 + 1
    assert data.max_completion_length == 512 - data.max_prompt_length


def test_split_is_seeded_and_sized_by_train_validation_split(tokenizer, tmp_path):
    rows = [{"q": f"Question {i}", "a": str(i)} for i in range(40)]
    spec, raw = load(rows, tmp_path / "split.jsonl", format="columns", question_column="q", answer_column="a")
    first = DatasetProcessor(config(), tokenizer).grpo_dataset(raw, spec)
    second = DatasetProcessor(config(), tokenizer).grpo_dataset(raw, spec)
    assert (len(first.train), len(first.validation)) == (36, 4)
    assert first.validation["answer"] == second.validation["answer"]
    assert not set(first.train["answer"]) & set(first.validation["answer"])
    assert set(first.seconds) == {"format", "tokenize", "length_filter", "split"}


def _prompt_length(tokenizer, question: str) -> int:
    conversation = [
        {"role": "system", "content": PROMPT.system_prompt},
        {"role": "user", "content": question},
    ]
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_processor_needs_a_chat_template():
    from llm_finetuning.errors import ModelError

    class Bare:
        chat_template = None

    with pytest.raises(ModelError, match="no chat_template"):
        DatasetProcessor(config(), Bare())


def test_lengths_are_measured_with_the_chat_template(tokenizer, tmp_path):
    spec, raw = load(DAPO, tmp_path / "dapo.jsonl")
    data = DatasetProcessor(config(), tokenizer).grpo_dataset(raw, spec)
    assert data.max_prompt_length == _prompt_length(tokenizer, "Find 6 * 7.") + 1
