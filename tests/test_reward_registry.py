"""The registry: names, building with and without parameters, error messages, config hand-off,
pickling, threads and processes."""

import concurrent.futures
import multiprocessing
import pickle
from dataclasses import dataclass, field

import pytest

from llm_finetuning.rewards import (
    RewardParamError,
    UnknownRewardError,
    available_rewards,
    build_rewards,
    get_reward,
    validate_reward_specs,
)

ALL_NAMES = [
    "accuracy",
    "check_answer",
    "check_numbers",
    "check_working",
    "correctness",
    "cosine",
    "format",
    "int",
    "match_format_approximately",
    "match_format_exactly",
    "r1_zero",
    "reasoning_gym",
    "reasoning_steps",
    "repetition_penalty",
    "soft_format",
    "strict_format",
    "xmlcount",
]

# The rewards that score the shared batch against its ``answer`` column. reasoning_gym scores against a
# reasoning-gym entry and needs its extra: tests/test_reasoning_gym_reward.py holds it to the same contract;
# check_working scores against a worked solution: tests/test_working_reward.py.
ANSWER_NAMES = [name for name in ALL_NAMES if name not in ("reasoning_gym", "check_working")]

BATCH = [
    "2+2=4<end_working_out><SOLUTION>4</SOLUTION>",
    "<think>\nStep 1: 2+2\n</think> <answer>4</answer>",
    "<reasoning>\n2+2\n</reasoning>\n<answer>\n4\n</answer>\n",
    "",
    "la la la la la la",
]
GOLDS = ["4"] * len(BATCH)


def score(reward, completions=BATCH):
    return reward(prompts=["Q"] * len(completions), completions=completions, answer=GOLDS[: len(completions)])


def test_available_rewards_lists_every_reward():
    assert available_rewards() == ALL_NAMES


@pytest.mark.parametrize("name", ANSWER_NAMES)
def test_every_reward_builds_without_params_and_scores_a_batch(name):
    reward = get_reward(name)
    assert reward.__name__ == name
    low, high = reward.bounds()
    for completions in (BATCH, [[{"role": "assistant", "content": c}] for c in BATCH]):
        scores = score(reward, completions)
        assert len(scores) == len(BATCH)
        assert all(isinstance(s, float) and low <= s <= high for s in scores)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("match_format_exactly", [3.0, 0.0, 0.0, 0.0, 0.0]),
        ("check_answer", [5.0, -2.0, -2.0, -2.0, -2.0]),
        ("format", [0.0, 1.0, 0.0, 0.0, 0.0]),
        ("strict_format", [0.0, 0.0, 0.5, 0.0, 0.0]),
        ("r1_zero", [0.0, 1.0, 0.0, 0.0, 0.0]),
    ],
)
def test_each_reward_family_recognises_its_own_format(name, expected):
    assert score(get_reward(name)) == expected


def test_unknown_name_lists_valid_names_and_the_closest():
    with pytest.raises(UnknownRewardError) as error:
        get_reward("check_answr")
    message = str(error.value)
    assert "'check_answr'" in message and "did you mean 'check_answer'" in message
    assert all(name in message for name in ALL_NAMES)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize(
    ("name", "params", "fragment"),
    [
        ("check_answer", {"exactt": 1.0}, "unknown parameter 'exactt' (did you mean 'exact'?)"),
        ("check_answer", {"exact": "high"}, "parameter 'exact': expected float, got 'high' (str)"),
        ("check_answer", {"exact": True}, "parameter 'exact': expected float, got True (bool)"),
        ("check_answer", {"wrong": float("nan")}, "parameter 'wrong' must be a finite number"),
        ("check_answer", {"near_ratio": 0.05}, "parameter 'near_ratio' must be >= close_ratio"),
        (
            "check_answer",
            {"preset": "unsloth"},
            "parameter 'preset' must be one of ['graded', 'unsloth_qwen3_notebook']",
        ),
        ("check_answer", {"exact_match": "sympy"}, "parameter 'exact_match': expected one of string, grader"),
        ("check_answer", {"solution_start": ""}, "parameter 'solution_start' must be a non-empty tag"),
        ("check_answer", {"eos_texts": [1, 2]}, "parameter 'eos_texts'[0]: expected str, got 1 (int)"),
        ("check_answer", {"eos_texts": "</s>"}, "parameter 'eos_texts': expected a list, got '</s>'"),
        ("check_numbers", {"solution_start": 3}, "parameter 'solution_start': expected str, got 3 (int)"),
        ("cosine", {"max_len": -5}, "parameter 'max_len' must be > 0"),
        ("cosine", {"max_len": 10.5}, "parameter 'max_len': expected int, got 10.5 (float)"),
        ("cosine", {"min_value_wrong": 0.0}, "parameter 'max_value_wrong' must be >= min_value_wrong"),
        ("repetition_penalty", {"max_penalty": 0.5}, "parameter 'max_penalty' must be <= 0"),
        ("repetition_penalty", {"ngram_size": 0}, "parameter 'ngram_size' must be >= 1"),
        ("reasoning_steps", {"target_steps": 0}, "parameter 'target_steps' must be > 0"),
        ("reasoning_steps", {"markers": [""]}, "parameter 'markers' must not contain an empty string"),
        ("format", {"require_think_start": "yes"}, "parameter 'require_think_start': expected bool, got 'yes'"),
        ("r1_zero", {"format_weight": 2.0}, "parameter 'format_weight' must be in [0, 1]"),
        ("xmlcount", {"per_char": -1.0}, "parameter 'per_char' must be >= 0"),
        ("correctness", {"answer_tag": "<answer>"}, "parameter 'answer_tag' must be a bare tag name"),
        ("match_format_exactly", {"preset": "x"}, "unknown parameter 'preset'"),
    ],
)
def test_bad_params_are_rejected_at_build_time_naming_the_param(name, params, fragment):
    with pytest.raises(RewardParamError) as error:
        get_reward(name, **params)
    assert fragment in str(error.value)
    assert str(error.value).startswith(f"{name}: ")


def test_params_are_converted_as_config_fields_are():
    reward = get_reward("check_answer", exact=5, eos_texts=["</s>"], close_ratio="1e-2")
    assert (reward.exact, reward.eos_texts, reward.close_ratio) == (5.0, ("</s>",), 0.01)


def test_presets_reproduce_the_unsloth_notebook_ranges_and_explicit_params_win():
    assert get_reward("check_answer", preset="unsloth_qwen3_notebook").bounds() == (-4.5, 5.0)
    assert get_reward("check_numbers", preset="unsloth_qwen3_notebook").bounds() == (-2.5, 3.5)
    assert get_reward("check_answer").bounds() == (-2.0, 5.0)
    assert get_reward("check_numbers").bounds() == (-1.5, 3.0)
    assert get_reward("check_answer", preset="unsloth_qwen3_notebook", not_numeric=-3.0).bounds() == (
        -3.0,
        5.0,
    )


def test_the_graded_preset_keeps_the_notebook_values_and_asks_the_grader():
    graded = get_reward("check_answer", preset="graded")
    assert graded.bounds() == get_reward("check_answer").bounds()
    assert (graded.exact_match, graded.uses_grader) == ("grader", True)
    assert get_reward("check_answer").uses_grader is False
    combined = get_reward("check_answer", preset="unsloth_qwen3_notebook", exact_match="grader")
    assert (combined.exact_match, combined.bounds()) == ("grader", (-4.5, 5.0))


@dataclass
class Prompt:  # the PromptConfig fields the registry reads
    reasoning_start: str = "<think>"
    reasoning_end: str = "</think>"
    solution_start: str = "<answer>"
    solution_end: str = "</answer>"


@dataclass
class Spec:
    name: str
    weight: float = 1.0
    params: dict = field(default_factory=dict)


@dataclass
class Rewards:
    rewards: list


def test_build_rewards_takes_tags_from_the_prompt_config_and_params_override_them():
    config = Rewards([Spec("match_format_exactly", 2.0), Spec("check_numbers", 0.5, {"solution_start": "="})])
    funcs, weights = build_rewards(config, Prompt())
    assert [f.__name__ for f in funcs] == ["match_format_exactly", "check_numbers"]
    assert weights == [2.0, 0.5]
    assert funcs[0].reasoning_end == "</think>" and funcs[0].solution_start == "<answer>"
    assert funcs[1].solution_start == "="
    assert funcs[0](completions=["2+2</think><answer>4</answer>"]) == [3.0]
    assert funcs[1](completions=["x = 4"], answer=["4"]) == [3.0]


def test_build_rewards_with_the_project_config_defaults_gives_the_notebook_four():
    config = pytest.importorskip("llm_finetuning.config")
    funcs, weights = build_rewards(config.RewardConfig(), config.PromptConfig())
    names = ["match_format_exactly", "match_format_approximately", "check_answer", "check_numbers"]
    assert [f.__name__ for f in funcs] == names
    assert weights == [1.0, 1.0, 1.0, 1.0]
    low = sum(f.bounds()[0] for f in funcs)
    high = sum(f.bounds()[1] for f in funcs)
    assert (low, high) == (-6.5, 12.5)


@pytest.mark.parametrize(
    ("specs", "error", "fragment"),
    [
        ([Spec("acuracy")], UnknownRewardError, "did you mean 'accuracy'"),
        ([Spec("")], UnknownRewardError, "unknown reward ''"),
        (
            [{"name": "accuracy", "weight": "high"}],
            RewardParamError,
            "accuracy: weight must be a finite number",
        ),
        ([{"name": "accuracy", "params": [1]}], RewardParamError, "accuracy: params must be a mapping"),
        ([Spec("int"), Spec("int", 2.0)], RewardParamError, "reward 'int' is listed 2 times"),
        (
            [Spec("cosine", params={"max_len": 0})],
            RewardParamError,
            "cosine: parameter 'max_len' must be > 0",
        ),
        ("accuracy", ValueError, "expected a list of rewards"),
    ],
)
def test_validate_reward_specs_rejects_bad_specs(specs, error, fragment):
    with pytest.raises(error) as caught:
        validate_reward_specs(specs)
    assert fragment in str(caught.value)


def test_validate_reward_specs_accepts_specs_and_plain_mappings():
    validate_reward_specs([Spec("accuracy"), {"name": "cosine", "weight": 0.5, "params": {"max_len": 2000}}])
    validate_reward_specs([{"name": "check_answer", "params": {"preset": "unsloth_qwen3_notebook"}}])


@pytest.mark.parametrize("name", ANSWER_NAMES)
def test_pickle_round_trip_scores_the_same(name):
    reward = get_reward(name)
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == name
    assert score(copy) == score(reward)


def test_worker_threads_score_the_same_as_the_main_thread():
    rewards = [get_reward(name) for name in ANSWER_NAMES]
    expected = [score(r) for r in rewards]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(score, rewards * 4)) == expected * 4


def test_a_spawned_worker_process_scores_the_same():
    rewards = [get_reward(name) for name in ANSWER_NAMES]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        assert list(pool.map(score, rewards)) == [score(r) for r in rewards]
