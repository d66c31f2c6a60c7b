"""reasoning-gym as a data source, on the real package: task checks, the held-out split, worked solutions, and
the SFT and GRPO rows the processor makes of them.

Run with ``uv run --extra reasoning-gym pytest -m reasoning_gym``; skipped, saying so, without the extra.
"""

from __future__ import annotations

import json
import logging
import re
from random import Random

import pytest
from conftest import reasoning_gym_marks

from llm_finetuning.config import ConfigError, DatasetSpec, PipelineConfig, ReasoningGymConfig
from llm_finetuning.data import DatasetLoader, DatasetProcessor
from llm_finetuning.errors import DataError
from llm_finetuning.session.checks import check_config
from llm_finetuning.tasks.gym import task_dataset
from llm_finetuning.tasks.gym_rows import SEED_STRIDE, generate_task_rows, heldout_templates
from llm_finetuning.tasks.workings import WORKINGS, agrees

pytestmark = reasoning_gym_marks()

SMALL_SUMS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}  # 200 distinct questions


def config(sft: str = "synthetic:arithmetic", grpo: str = "synthetic:arithmetic", **rgym) -> PipelineConfig:
    data = {"seed": 0, "prompt_length_percentile": 100.0, "sft_max_length_fraction": 1.0,
            "sft": {"name": sft}, "grpo": {"name": grpo}, "reasoning_gym": rgym}  # fmt: skip
    return PipelineConfig.from_dict({"model": {"max_seq_length": 8192}, "data": data})


def split(rows) -> tuple[list[dict], list[dict]]:
    rows = list(rows)
    return [r for r in rows if r["split"] == "train"], [r for r in rows if r["split"] == "eval"]


def streams(rows) -> set[int]:
    """The random streams the rows' entries came from (reasoning-gym makes entry i from seed + i)."""
    refs = [json.loads(r["reasoning_gym_entry"]) for r in rows]
    return {ref["seed"] + ref["index"] for ref in refs}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"grpo": {"name": "reasoning_gym:gsm_symbolc"}},
         "data.grpo.name: unknown reasoning-gym task 'gsm_symbolc'; did you mean gsm_symbolic?"),
        ({"sft": {"name": "reasoning_gym:zzzz"}}, "data.sft.name: unknown reasoning-gym task 'zzzz'; valid tasks: ab, "),
        ({"grpo": {"name": "reasoning_gym:chain_sum"}, "reasoning_gym": {"settings": {"chain_sm": {}}}},
         "data.reasoning_gym.settings.chain_sm: unknown reasoning-gym task 'chain_sm'; did you mean chain_sum?"),
        ({"grpo": {"name": "reasoning_gym:chain_sum"}, "reasoning_gym": {"settings": {"chain_sum": {"min_term": 2}}}},
         "data.reasoning_gym.settings.chain_sum.min_term: unknown setting of chain_sum; did you mean min_terms?"),
        ({"grpo": {"name": "reasoning_gym:chain_sum"},
          "reasoning_gym": {"settings": {"chain_sum": {"min_terms": 3, "max_terms": 2}}}},
         "data.reasoning_gym.settings.chain_sum: chain_sum refuses these settings (max_terms must be >= min_terms)"),
        ({"grpo": {"name": "reasoning_gym:chain_sum"}, "reasoning_gym": {"settings": {"chain_sum": {"seed": 1}}}},
         "data.reasoning_gym.settings.chain_sum.seed: set data.reasoning_gym.seed / num_train instead"),
        ({"grpo": {"name": "reasoning_gym:chain_sum", "train_settings": {"min_digit": 2}}},
         "data.grpo.train_settings.min_digit: unknown setting of chain_sum; did you mean min_digits?"),
        ({"grpo": {"name": "reasoning_gym:chain_sum", "train_settings": {"min_digits": 3}},
          "reasoning_gym": {"settings": {"chain_sum": {"max_digits": 2}}}},
         "data.grpo.train_settings: chain_sum refuses these settings"),
    ],
)  # fmt: skip
def test_unknown_tasks_and_settings_are_one_line_config_errors_naming_the_closest(data, message):
    with pytest.raises(ConfigError) as caught:
        check_config(PipelineConfig.from_dict({"data": data}))  # the tasks are checked by tasks/gym.py's rules
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_a_task_the_allow_list_refuses_is_a_one_line_config_error_with_the_reason(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    cases = {"composite": "data.grpo.name: refused: its verifier hands each answer to other tasks",
             "ransom_note": "data.grpo.name: refused without a fixed hash seed: its problems depend on Python's hash "
                            "seed, so the verifier's worker would judge another problem than the model's; run with "
                            "PYTHONHASHSEED=0"}  # fmt: skip
    for task, message in cases.items():
        with pytest.raises(ConfigError) as caught:
            check_config(PipelineConfig.from_dict({"data": {"grpo": {"name": f"reasoning_gym:{task}"}}}))
        assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # the fix the message names
    check_config(PipelineConfig.from_dict({"data": {"grpo": {"name": "reasoning_gym:ransom_note"}}}))


def test_a_refused_task_scores_zero_even_when_a_row_names_it():
    from llm_finetuning.tasks.gym import entry_ref, verify

    outcome = verify(entry_ref("composite", {}, seed=1, size=1, index=0), "anything", 5.0)
    assert not outcome.ok and outcome.failure.startswith("refused: its verifier hands")


def test_a_valid_task_and_its_settings_load():
    cfg = config(grpo="reasoning_gym:chain_sum", settings={"chain_sum": {"max_terms": 3, "max_digits": 2}})
    assert cfg.data.reasoning_gym.settings["chain_sum"] == {"max_terms": 3, "max_digits": 2}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gsm_symbolic_held_out_problems_share_no_stream_template_or_question_with_training(seed):
    train, heldout = split(generate_task_rows(ReasoningGymConfig(num_train=400, num_eval=60), "gsm_symbolic", seed))
    assert (len(train), len(heldout)) == (400, 60)
    held = heldout_templates("gsm_symbolic", 0.2, seed * SEED_STRIDE)  # chosen with the seed of the streams
    assert len(held) == 17  # 20 % of the 85 templates gsm_symbolic draws from
    assert {r["template"] for r in heldout} <= held
    assert not {r["template"] for r in train} & held
    assert len({r["template"] for r in train}) == 85 - 17  # training still covers every other template
    assert not {r["question"] for r in heldout} & {r["question"] for r in train}
    assert len({r["question"] for r in heldout}) == 60
    assert not streams(heldout) & streams(train)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_template_column_is_the_generator_that_wrote_the_question(seed):
    rows = generate_task_rows(ReasoningGymConfig(num_train=40, num_eval=10), "gsm_symbolic", seed)
    for row in rows:
        ref = json.loads(row["reasoning_gym_entry"])
        dataset = task_dataset("gsm_symbolic", {}, ref["seed"], ref["size"])
        written = dataset.generators[row["template"]](Random(ref["seed"] + ref["index"]), 1.0)["question"]
        assert row["question"].startswith(written)
        assert dataset[ref["index"]]["question"] == row["question"]  # the reference rebuilds the entry


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_task_without_templates_is_held_out_by_seed_and_question(seed):
    cfg = ReasoningGymConfig(num_train=150, num_eval=30, settings={"chain_sum": SMALL_SUMS})
    train, heldout = split(generate_task_rows(cfg, "chain_sum", seed))
    assert (len(train), len(heldout)) == (150, 30)
    assert {r["template"] for r in train + heldout} == {-1}
    assert not {r["question"] for r in heldout} & {r["question"] for r in train}
    assert not streams(heldout) & streams(train)


CHAIN_SUMS = {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2}


def test_training_on_problems_of_its_own_settings_keeps_the_held_out_problems_and_none_of_them():
    cfg = ReasoningGymConfig(num_train=300, num_eval=60, settings={"chain_sum": CHAIN_SUMS})
    plain_train, heldout = split(generate_task_rows(cfg, "chain_sum", 0))
    train, own_heldout = split(generate_task_rows(cfg, "chain_sum", 0, {"min_digits": 2}))
    assert own_heldout == heldout  # measured on the same problems
    assert len(train) == 300 and train != plain_train
    assert {json.loads(row["difficulty"])["num_digits"] for row in train} == {2}
    assert {json.loads(row["difficulty"])["num_digits"] for row in heldout} == {1, 2}
    assert not {row["question"] for row in train} & {row["question"] for row in heldout}
    assert not streams(heldout) & streams(train)
    for row in train[:20]:  # each reference rebuilds its entry with the dataset's settings (its verifier's entry)
        ref = json.loads(row["reasoning_gym_entry"])
        assert ref["settings"] == {**CHAIN_SUMS, "min_digits": 2}
        assert task_dataset("chain_sum", ref["settings"], ref["seed"], ref["size"])[ref["index"]]["question"] == row["question"]


def test_train_settings_belong_to_generated_reasoning_gym_data():
    with pytest.raises(ConfigError, match=r"^data.grpo.train_settings: .*reasoning_gym:<task>"):
        PipelineConfig.from_dict({"data": {"grpo": {"name": "gsm8k", "train_settings": {"min_digits": 2}}}})


def test_same_config_and_seed_same_rows_other_seed_other_rows():
    cfg = ReasoningGymConfig(num_train=50, num_eval=10)
    assert generate_task_rows(cfg, "gsm_symbolic", 4).to_dict() == generate_task_rows(cfg, "gsm_symbolic", 4).to_dict()
    assert generate_task_rows(cfg, "gsm_symbolic", 4)["question"] != generate_task_rows(cfg, "gsm_symbolic", 5)["question"]


def test_data_seeds_one_apart_share_no_random_stream():
    # reasoning-gym makes entry i from the stream seed + i: without the stride, seed 1's rows would be seed 0's
    # shifted by one entry, every held-out problem and all but one training problem the same
    cfg = ReasoningGymConfig(num_train=50, num_eval=10, settings={"chain_sum": CHAIN_SUMS})
    seed0, seed1 = (generate_task_rows(cfg, "chain_sum", seed) for seed in (0, 1))
    assert not streams(seed0) & streams(seed1)
    assert split(seed0)[1] != split(seed1)[1]
    explicit = ReasoningGymConfig(num_train=50, num_eval=10, settings={"chain_sum": CHAIN_SUMS}, seed=SEED_STRIDE)
    assert generate_task_rows(explicit, "chain_sum", 0).to_dict() == seed1.to_dict()  # the stream it stands for


def test_a_held_out_seed_inside_the_training_streams_is_refused():
    cfg = ReasoningGymConfig(num_train=50, num_eval=10, eval_seed=20, settings={"chain_sum": {}})
    with pytest.raises(DataError, match=r"share random streams with training .*leave data.reasoning_gym.eval_seed null"):
        generate_task_rows(cfg, "chain_sum", 0)


def test_too_few_new_questions_for_the_held_out_set_names_the_settings():
    cfg = ReasoningGymConfig(num_train=3000, num_eval=50, settings={"chain_sum": SMALL_SUMS})
    with pytest.raises(DataError, match=r"found only \d+ held-out problems .*data.reasoning_gym.settings.chain_sum"):
        generate_task_rows(cfg, "chain_sum", 0)


def test_the_loader_caps_training_rows_and_keeps_every_held_out_row():
    cfg = config(grpo="reasoning_gym:gsm_symbolic", num_train=80, num_eval=12)
    spec = DatasetSpec(name="reasoning_gym:gsm_symbolic", max_samples=20)
    train, heldout = split(DatasetLoader.for_data(spec, cfg).load())
    assert (len(train), len(heldout)) == (20, 12)


def gsm_entry(seed: int = 0) -> dict:
    return task_dataset("gsm_symbolic", {}, seed=seed, size=1)[0]


def test_a_gsm_symbolic_worked_solution_becomes_the_reasoning_and_its_answer_agrees():
    entry = gsm_entry()
    cot = entry["metadata"]["answer_cot"]
    working = WORKINGS["gsm_symbolic"](entry)
    assert working.text == cot.rsplit("####", 1)[0].strip()
    assert "####" not in working.text and working.text
    assert working.answer == entry["answer"] and agrees(working.answer, entry["answer"])


def test_a_sloppy_worked_solution_disagrees_with_the_entry():
    entry = gsm_entry()
    sloppy = {**entry, "metadata": {**entry["metadata"],
              "answer_cot": re.sub(r"#### .*$", f"#### {int(entry['answer']) + 1}", entry["metadata"]["answer_cot"])}}
    assert not agrees(WORKINGS["gsm_symbolic"](sloppy).answer, entry["answer"])  # fmt: skip


WORKED_TASKS = [
    ("chain_sum", {}),
    ("chain_sum", {"allow_negation": True, "max_terms": 8}),
    ("basic_arithmetic", {}),
    ("basic_arithmetic", {"allow_negation": False, "max_digits": 2}),
    ("basic_arithmetic", {"whitespace": "random", "format_style": "natural"}),
    ("basic_arithmetic", {"whitespace": "no_space", "operators": ["+", "-", "*"]}),
    ("basic_arithmetic", {"allow_parentheses": False, "operators": ["+", "-"]}),
]
_STEP = re.compile(r"^(-?\d+) ([-+*/]) \(?(-?\d+)\)? = (-?\d+)$|^-\((-?\d+)\) = (-?\d+)$")
_APPLY = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "/": int.__floordiv__}


@pytest.mark.parametrize(("task", "settings"), WORKED_TASKS)
def test_project_written_workings_pass_the_tasks_own_verifier_and_every_step_is_right(task, settings):
    dataset = task_dataset(task, settings, seed=11, size=150)
    for index in range(len(dataset)):
        entry = dataset[index]
        working = WORKINGS[task](entry)
        assert working is not None, entry["question"]
        assert dataset.score_answer(working.answer, entry) == 1.0, (entry["question"], working)
        for line in working.text.splitlines():
            step = _STEP.match(line)
            if step and step[2]:
                assert _APPLY[step[2]](int(step[1]), int(step[3])) == int(step[4]), line
            elif step:
                assert -int(step[5]) == int(step[6]), line
            else:
                assert line == f"{entry['metadata']['expression']} = {working.answer}"  # a lone number


def test_basic_arithmetic_without_parentheses_answers_left_to_right_so_its_workings_are_dropped():
    # reasoning-gym's answer for "Calculate 7 * 4 - 0 * 0 - 2 - 10." is -12 (left to right), not 16: the working
    # (which respects precedence) disagrees, and SFT drops such rows rather than teach either
    dataset = task_dataset("basic_arithmetic", {"allow_parentheses": False, "operators": ["+", "-", "*"]}, 5, 300)
    verdicts = [agrees(WORKINGS["basic_arithmetic"](entry).answer, entry["answer"]) for entry in dataset]
    assert 0 < verdicts.count(False) < len(verdicts)


@pytest.fixture
def tokenizer(tiny_tokenizer):
    return tiny_tokenizer


def test_sft_rows_are_training_problems_in_our_format_and_disagreeing_workings_are_counted(tokenizer, caplog):
    settings = {"basic_arithmetic": {"allow_parentheses": False, "operators": ["+", "-", "*"], "max_digits": 1}}
    cfg = config(sft="reasoning_gym:basic_arithmetic", num_train=60, num_eval=10, settings=settings)
    raw = DatasetLoader.for_data(cfg.data.sft, cfg).load()
    train, _ = split(raw)
    agreeing = [r for r in train if r["working_agrees"]]
    with caplog.at_level(logging.INFO, logger="llm_finetuning.data.processor"):
        sft = DatasetProcessor(cfg, tokenizer).sft_dataset(raw, cfg.data.sft)
    counts = re.search(r"reasoning_found=(\d+), solution_agrees=(\d+), training_rows=(\d+)", caplog.text)
    assert counts and int(counts[2]) < int(counts[1]) and int(counts[3]) == len(agreeing) == len(sft)
    for row, source in zip(sft, agreeing, strict=True):
        assert row["prompt"][-1]["content"] == source["question"]
        assert row["completion"][0]["content"] == (
            f"{source['working']}<end_working_out><SOLUTION>{source['answer']}</SOLUTION>"
        )


def test_gsm_symbolic_sft_completion_is_the_worked_solution_then_the_answer(tokenizer):
    cfg = config(sft="reasoning_gym:gsm_symbolic", num_train=12, num_eval=4)
    sft = DatasetProcessor(cfg, tokenizer).sft_dataset(DatasetLoader.for_data(cfg.data.sft, cfg).load(),
                                                       cfg.data.sft)  # fmt: skip
    assert len(sft) == 12
    completion = sft[0]["completion"][0]["content"]
    pattern = r"(.+)<end_working_out><SOLUTION>(.+)</SOLUTION>"
    reasoning, answer = re.fullmatch(pattern, completion, re.DOTALL).groups()
    assert "####" not in reasoning and answer in reasoning


def test_grpo_validation_is_exactly_the_held_out_problems_with_their_entries(tokenizer):
    cfg = config(grpo="reasoning_gym:gsm_symbolic", num_train=40, num_eval=8)
    raw = DatasetLoader.for_data(cfg.data.grpo, cfg).load()
    train, heldout = split(raw)
    data = DatasetProcessor(cfg, tokenizer).grpo_dataset(raw, cfg.data.grpo)
    assert [r["prompt"][-1]["content"] for r in data.validation] == [r["question"] for r in heldout]
    assert [r["prompt"][-1]["content"] for r in data.train] == [r["question"] for r in train]
    assert data.validation["reasoning_gym_entry"] == [r["reasoning_gym_entry"] for r in heldout]
    assert set(data.train.column_names) >= {"prompt", "answer", "reasoning_gym_entry", "task", "template"}


def test_sft_on_a_task_without_worked_solutions_names_the_tasks_that_have_them(tokenizer):
    cfg = config(sft="reasoning_gym:leg_counting", num_train=5, num_eval=0)
    raw = DatasetLoader.for_data(cfg.data.sft, cfg).load()
    with pytest.raises(DataError, match="no worked solutions for reasoning-gym's leg_counting.*basic_arithmetic, "
                                        "chain_sum, gsm_symbolic"):  # fmt: skip
        DatasetProcessor(cfg, tokenizer).sft_dataset(raw, cfg.data.sft)
