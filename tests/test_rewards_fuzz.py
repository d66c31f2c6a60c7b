"""Hang and crash guard: generated and hostile completions through every registered reward.

Properties: no exception, one score per completion, each score a float inside the reward's bounds
(or None), and every call well under a second. The time bounds are generous on purpose: they catch
catastrophic regex backtracking and unbounded parsing, not slowness.
"""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_finetuning.grading import warm_up
from llm_finetuning.rewards import available_rewards, get_reward

# reasoning_gym needs its extra and a reasoning-gym entry: tests/test_reasoning_gym_reward.py fuzzes it
REWARDS = [get_reward(name) for name in available_rewards() if name != "reasoning_gym"]
GRADED = {"accuracy", "cosine", "r1_zero"}  # ask the math grader, which bounds its own time
PARSING_REWARDS = [r for r in REWARDS if r.__name__ not in GRADED]
CALL_LIMIT_S = 1.0

TAGS = [
    "<start_working_out>", "<end_working_out>", "<SOLUTION>", "</SOLUTION>", "<think>", "</think>",
    "</think> <answer>", "<answer>", "</answer>", "<reasoning>", "</reasoning>", "\n", " ", "Step 1:",
    "1.", "First,", "\n-", "\\boxed{", "}", "{", "\\frac{", "####", "The answer is", "<|im_end|>",
    "<|endoftext|>", "-", ",", ".", "e", "^", "9^{9^{9^9}}", "\\sqrt{", "(", ")", "=",
]  # fmt: skip
NUMBERS = st.one_of(
    st.integers().map(str),
    st.integers(min_value=10**30, max_value=10**400).map(str),
    st.floats().map(str),
    st.decimals(allow_nan=False).map(str),
)
FRAGMENT = st.one_of(st.sampled_from(TAGS), st.text(max_size=30), NUMBERS)
GOLD = st.one_of(
    st.sampled_from(["4", "42", "-3.5", "1,234", "\\frac{1}{2}", "x^2", "", "9^{9^{9^9}}"]), NUMBERS
)
BATCH_SIZE = 40


@pytest.fixture(scope="module", autouse=True)
def warm_grader():
    warm_up()  # a cold comparison waits for sympy's import (seconds, once): not what the bounds measure


@st.composite
def batches(draw, material, vocabulary=()):
    """BATCH_SIZE completions spliced from a little drawn material plus ``vocabulary`` (cheap to
    generate, unlike drawing every piece of every completion) by a Random Hypothesis also draws."""
    pieces = draw(st.lists(material, min_size=1, max_size=10)) + list(vocabulary)
    rng = draw(st.randoms(use_true_random=False))
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(BATCH_SIZE)]


def chat(text):
    return [{"role": "assistant", "content": text}]


def check_every_reward(completions, golds, rewards=REWARDS, limit_s=CALL_LIMIT_S):
    for reward in rewards:
        started = time.perf_counter()
        scores = reward(prompts=["Q"] * len(completions), completions=completions, answer=golds,
                        worked_completion=golds)  # check_working's gold: a worked solution
        elapsed = time.perf_counter() - started
        assert elapsed < limit_s, f"{reward.__name__} took {elapsed:.2f} s on {len(completions)} completions"
        assert len(scores) == len(completions)
        low, high = reward.bounds()
        for score in scores:
            assert score is None or (isinstance(score, float) and low <= score <= high), (
                reward.__name__,
                score,
            )


def run_property(material, examples, vocabulary=()):
    """Score ``examples`` generated batches with every reward; return how many completions were seen."""
    seen = []

    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(batch=batches(material, vocabulary), gold=GOLD, as_chat=st.booleans())
    def check(batch, gold, as_chat):
        seen.append(len(batch))
        check_every_reward([chat(t) for t in batch] if as_chat else batch, [gold] * len(batch))

    check()
    return sum(seen)


def test_random_unicode_completions_never_break_a_reward():
    assert run_property(st.text(max_size=40), examples=100) >= 100 * BATCH_SIZE


def test_tag_soup_completions_never_break_a_reward():
    assert run_property(FRAGMENT, examples=160, vocabulary=TAGS) >= 160 * BATCH_SIZE


HOSTILE = [
    "",
    "<end_working_out><SOLUTION>\\boxed{9^{9^{9^9}}}</SOLUTION>",
    "</think> <answer>\\boxed{9^{9^{9^9}}}</answer>",
    "<end_working_out><SOLUTION>" + "9" * 100_000 + "</SOLUTION>",
    "</think> <answer>" + "9" * 100_000 + "</answer>",
    "<SOLUTION>" + "1," * 50_000,
    "<end_working_out><SOLUTION>1e999999</SOLUTION>",
    "<end_working_out><SOLUTION>nan</SOLUTION>",
    "<end_working_out><SOLUTION>-0</SOLUTION>",
    "</think> <answer>10**10**10**10</answer>",
    "</think> <answer>" + "(" * 50_000 + "</answer>",
    "\\boxed{" * 20_000,
    "</think> <answer>" + "\\frac{" * 5_000 + "</answer>",
    "{" * 100_000,
    "<SOLUTION>" * 10_000,
    "<think>" * 10_000 + "</think>" * 10_000,
    "<reasoning>\n" * 5_000 + "\n</answer>" * 5_000,
    "Step 1:" * 15_000,
    "1" * 100_000 + "." + "\n1." * 10_000,
    "la " * 35_000,
    "٣٤ ² ½ 🙂 \u202e\x00\ud7ff <SOLUTION>٤</SOLUTION>",
    "\n" * 100_000,
    "<end_working_out><SOLUTION>" + "x" * 100_000,
]


def test_hostile_completions_never_break_a_reward():
    golds = ["4", "9^{9^{9^9}}", "9" * 1_000, "", "nan", "0"]
    for gold in golds:
        check_every_reward(HOSTILE, [gold] * len(HOSTILE), limit_s=5.0)
        check_every_reward([chat(t) for t in HOSTILE[:5]], [gold] * 5)


MEGABYTE_OF_TAGS = [
    "<end_working_out><SOLUTION>" * 40_000,
    "</SOLUTION><SOLUTION>" * 50_000,
    "<think></think><answer>" * 45_000,
    "<reasoning>\n</reasoning>\n<answer>\n" * 30_000,
    "\n</answer>\n<answer>" * 55_000,
    "Step 1:\n1.\n-First," * 60_000,
]


def test_a_megabyte_of_repeated_tags_scores_in_under_a_second_per_parsing_reward():
    for text in MEGABYTE_OF_TAGS:
        assert len(text) >= 1_000_000
        for reward in PARSING_REWARDS:
            started = time.perf_counter()
            reward(completions=[text], answer=["4"])
            elapsed = time.perf_counter() - started
            assert elapsed < CALL_LIMIT_S, f"{reward.__name__} took {elapsed:.2f} s on 1 MB of tags"
