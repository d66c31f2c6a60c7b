"""DatasetLoader: local files of every kind through one path, seeded shuffle, max_samples, one-line errors.

The last test runs ``run_training.py`` on a bad local file: exit 2, one error line, no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_finetuning.config import DatasetSpec
from llm_finetuning.data import DatasetLoader
from llm_finetuning.errors import DataError

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(12)]


def write(path: Path, rows=ROWS) -> Path:
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    {"jsonl": dataset.to_json, "parquet": dataset.to_parquet, "csv": dataset.to_csv}[path.suffix[1:]](
        str(path)
    )
    return path


@pytest.mark.parametrize("suffix", ["jsonl", "parquet", "csv", "json"])
def test_every_local_kind_loads_the_same_rows(tmp_path, suffix):
    path = tmp_path / f"data.{suffix}"
    if suffix == "json":
        path.write_text(json.dumps(ROWS))
    else:
        write(path)
    dataset = DatasetLoader(DatasetSpec(name=str(path)), seed=0).load()
    assert sorted(map(str, dataset["answer"]), key=int) == [row["answer"] for row in ROWS]


def test_a_folder_of_one_kind_is_one_table(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path / "a.jsonl", ROWS[:5])
    write(tmp_path / "sub" / "b.jsonl", ROWS[5:])
    assert len(DatasetLoader(DatasetSpec(name=str(tmp_path)), seed=0).load()) == 12


def test_shuffle_is_seeded_and_max_samples_caps(tmp_path):
    spec = DatasetSpec(name=str(write(tmp_path / "d.jsonl")), max_samples=5)
    first, again = (DatasetLoader(spec, seed=1).load()["answer"] for _ in range(2))
    other = DatasetLoader(spec, seed=2).load()["answer"]
    assert len(first) == 5 and first == again and first != other


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing.csv", "missing.csv: file or folder not found; check the path"),
        (
            lambda tmp: tmp,
            "a local dataset must be one kind of .jsonl, .json, .parquet, .csv files (found no data",
        ),
        (
            lambda tmp: (write(tmp / "a.jsonl"), write(tmp / "b.csv"))[0].parent,
            "(found ['.csv', '.jsonl'])",
        ),
        (lambda tmp: _text(tmp / "broken.parquet", "not parquet"), "broken.parquet: cannot read the file ("),
        (lambda tmp: _text(tmp / "empty.jsonl", ""), "empty.jsonl: the file is empty"),
    ],
)
def test_local_file_errors_are_one_line(tmp_path, make, message):
    with pytest.raises(DataError) as caught:
        DatasetLoader(DatasetSpec(name=str(make(tmp_path))), seed=0).load()
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_unreachable_hub_names_the_dataset_and_the_offline_fixes(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError) as caught:
        DatasetLoader(DatasetSpec(name="openai/gsm8k", subset="main"), seed=0).load()
    message = str(caught.value)
    assert message.startswith("cannot load dataset 'openai/gsm8k' from the Hugging Face Hub")
    assert "local .jsonl/.json/.parquet/.csv file" in message and "configs/tiny.yaml" in message
    assert "\n" not in message


def test_unknown_generator_lists_the_valid_ones():
    with pytest.raises(
        DataError, match="synthetic:nope: unknown generator; valid names: synthetic:arithmetic"
    ):
        DatasetLoader(DatasetSpec(name="synthetic:nope"), seed=0).load()


def test_run_training_on_a_bad_local_file_exits_2_with_one_line(tmp_path):
    bad = write(tmp_path / "bad.jsonl", [{"question": "2 + 2?", "solution": "4"}])
    command = [
        sys.executable, str(ROOT / "run_training.py"), "--config", str(ROOT / "configs" / "tiny.yaml"),
        "--output-dir", str(tmp_path / "out"),
        "--set", f"data.grpo.name={bad}", "--set", "data.grpo.format=gsm8k", "--set", "log_level=ERROR",
        "--set", "data.synthetic.num_train=200", "--set", "data.synthetic.num_eval=10",
    ]  # fmt: skip
    env = {**os.environ, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    result = subprocess.run(
        command, check=False, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        (
            f"error: {bad}: format 'gsm8k' needs columns ['answer'] but the dataset has ['question', 'solution']; "
            "set format to the matching schema, or format: columns with question_column/answer_column"
        )
    ]


def _text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


DATA = ROOT / "tests" / "data"


@pytest.mark.parametrize(
    ("subset", "split", "problems"),
    [
        ("algebra", "test", 2),
        (["algebra", "geometry"], "test", 4),
        (["algebra", "geometry"], "train", 2),
    ],
)
def test_a_list_of_subsets_is_loaded_and_concatenated(subset, split, problems):
    # tests/data/hendrycks_math is laid out as EleutherAI/hendrycks_math: one config per subject
    spec = DatasetSpec(name=str(DATA / "hendrycks_math"), subset=subset, split=split)
    dataset = DatasetLoader(spec, seed=0).load()
    assert len(dataset) == problems
    assert set(dataset["type"]) == ({"Algebra"} if subset == "algebra" else {"Algebra", "Geometry"})


def test_an_unknown_subset_is_a_one_line_error_naming_subset_and_split():
    spec = DatasetSpec(name=str(DATA / "hendrycks_math"), subset=["algebra", "calculus"], split="test")
    with pytest.raises(DataError) as caught:
        DatasetLoader(spec, seed=0).load()
    message = str(caught.value)
    assert (
        "'calculus' not found" in message
        and "check subset (['algebra', 'calculus']) and split (test)" in message
    )
    assert "\n" not in message


def test_competition_math_says_it_merges_math_train_and_test(caplog):
    spec = DatasetSpec(name=str(DATA / "qwedsacf" / "competition_math"))
    with caplog.at_level("WARNING", logger="llm_finetuning.data.loader"):
        assert len(DatasetLoader(spec, seed=0).load()) == 2
    assert any("MATH's train and test problems merged" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="llm_finetuning.data.loader"):
        DatasetLoader(DatasetSpec(name=str(DATA / "eval_problem_answer.jsonl")), seed=0).load()
    assert not caplog.records


@pytest.mark.parametrize(("keep", "action"), [(False, "stripped"), (True, "kept")])
def test_loading_dapo_rows_counts_the_prompts_carrying_its_answer_instruction(caplog, keep, action):
    spec = DatasetSpec(name=str(DATA / "dapo_sample.jsonl"), keep_answer_instruction=keep)
    with caplog.at_level("INFO", logger="llm_finetuning.data.formats"):
        DatasetLoader(spec, seed=0).load()
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"DAPO's answer instruction found in 3 of 5 prompts; {action}" in m for m in messages)
