"""Each reward pinned on hand-written completions: perfect, partial, malformed and empty.

Every case is checked twice, as a plain string and as a chat message list, the two forms TRL passes.
"""

import logging

import pytest

from llm_finetuning.rewards import get_reward

SOLVED = "2 + 2 = 4, so the sum is 4.\n<end_working_out>\n<SOLUTION>{}</SOLUTION>"
XML = "<reasoning>\nAdd 70 and 2.\nThat is 72.\n</reasoning>\n<answer>\n{}\n</answer>\n"
UNSLOTH = {"preset": "unsloth_qwen3_notebook"}
GRADED = {"preset": "graded"}

# (reward, params, completion, gold answer or None, expected score)
CASES = [
    # match_format_exactly: reasoning end, a non-blank solution, then only whitespace / EOS text
    ("match_format_exactly", {}, SOLVED.format("4"), None, 3.0),
    ("match_format_exactly", {}, SOLVED.format("4") + "\n<|im_end|>\n", None, 3.0),
    ("match_format_exactly", {}, SOLVED.format("4") + "<|endoftext|>", None, 3.0),
    ("match_format_exactly", {}, "<start_working_out>x<end_working_out><SOLUTION>4</SOLUTION>", None, 3.0),
    ("match_format_exactly", {}, SOLVED.format("4") + "\nAnd more text", None, 0.0),
    ("match_format_exactly", {}, SOLVED.format("  "), None, 0.0),
    ("match_format_exactly", {}, "<SOLUTION>4</SOLUTION>", None, 0.0),
    ("match_format_exactly", {}, "<SOLUTION>4</SOLUTION><end_working_out>", None, 0.0),
    ("match_format_exactly", {}, "x<end_working_out><SOLUTION>4", None, 0.0),
    ("match_format_exactly", {}, "", None, 0.0),
    ("match_format_exactly", {"score": 1.0}, SOLVED.format("4"), None, 1.0),
    ("match_format_exactly", {"reasoning_end": "</think>"}, "x</think><SOLUTION>4</SOLUTION>", None, 3.0),
    ("match_format_exactly", {"eos_texts": []}, SOLVED.format("4") + "<|im_end|>", None, 0.0),
    # match_format_approximately: +0.5 per tag seen exactly once, -1.0 otherwise
    ("match_format_approximately", {}, SOLVED.format("4"), None, 1.5),
    ("match_format_approximately", {}, "x<end_working_out><SOLUTION>4", None, 0.0),
    ("match_format_approximately", {}, SOLVED.format("4") + "<SOLUTION>5</SOLUTION>", None, -1.5),
    ("match_format_approximately", {}, "just 4", None, -3.0),
    ("match_format_approximately", {}, "", None, -3.0),
    ("match_format_approximately", {"once": 1.0, "not_once": 0.0}, "<SOLUTION>", None, 1.0),
    # check_answer: the answer of the exact format against the gold string, then as numbers
    ("check_answer", {}, SOLVED.format("42"), "42", 5.0),
    ("check_answer", {}, SOLVED.format(" 42 "), "42", 3.5),
    ("check_answer", {}, SOLVED.format("44"), "42", 2.0),  # ratio 1.048
    ("check_answer", {}, SOLVED.format("37"), "42", 1.5),  # ratio 0.881
    ("check_answer", {}, SOLVED.format("7"), "42", -2.0),
    ("check_answer", {}, SOLVED.format("forty-two"), "42", -2.0),
    ("check_answer", {}, SOLVED.format("42") + " trailing", "42", -2.0),
    ("check_answer", {}, "The answer is 42", "42", -2.0),
    ("check_answer", {}, "", "42", -2.0),
    ("check_answer", {}, SOLVED.format("42"), 42, 5.0),  # a numeric gold column
    ("check_answer", UNSLOTH, SOLVED.format("7"), "42", -2.5),
    ("check_answer", UNSLOTH, SOLVED.format("forty-two"), "42", -4.5),
    ("check_answer", UNSLOTH, "", "42", -2.0),
    ("check_answer", {**UNSLOTH, "not_numeric": -1.0}, SOLVED.format("x"), "42", -1.0),
    # check_answer, preset graded: the exact tier is the grader's verdict, the other tiers the notebook's
    ("check_answer", GRADED, SOLVED.format("\\frac{9}{4}"), "2.25", 5.0),
    ("check_answer", {}, SOLVED.format("\\frac{9}{4}"), "2.25", -2.0),
    ("check_answer", GRADED, SOLVED.format("x = 2.250"), "2.25", 5.0),
    ("check_answer", GRADED, SOLVED.format("2.3"), "2.25", 2.0),  # not equal: the ratio tiers still apply
    ("check_answer", GRADED, SOLVED.format("0.44"), "\\frac{4}{9}", -2.0),  # a rounding is no exact answer
    ("check_answer", {**UNSLOTH, "exact_match": "grader"}, SOLVED.format("\\sqrt{8}"), "2\\sqrt{2}", 5.0),
    ("check_answer", GRADED, "The answer is 2.25", "2.25", -2.0),  # the notebook's format is still required
    # check_numbers: the first number after the solution start tag, compared as a number
    ("check_numbers", {}, SOLVED.format("1,234"), "1234", 3.0),
    ("check_numbers", {}, SOLVED.format("x = -3.5, or so"), "-3.5", 3.0),
    ("check_numbers", {}, SOLVED.format("12"), "13", -1.5),
    ("check_numbers", {}, SOLVED.format("none"), "13", -1.5),
    ("check_numbers", {}, "13", "13", -1.5),
    ("check_numbers", {}, "", "13", -1.5),
    ("check_numbers", {}, SOLVED.format("0.5"), "\\frac{1}{2}", 0.0),
    ("check_numbers", UNSLOTH, SOLVED.format("13"), "13", 3.5),
    ("check_numbers", UNSLOTH, "", "13", -2.5),
    # accuracy: the shared grader's verdict
    ("accuracy", {}, SOLVED.format("4"), "4", 1.0),
    ("accuracy", {}, SOLVED.format("5"), "4", 0.0),
    ("accuracy", {}, "", "4", 0.0),
    ("accuracy", {"solution_start": "<ans>", "solution_end": "</ans>"}, "<ans>4</ans>", "4", 1.0),
    # format: <think>…</think> then <answer>…</answer> closing the completion
    ("format", {}, "<think>\n2+2\n</think>\n<answer>\n4\n</answer>", None, 1.0),
    ("format", {}, "<think>2+2</think>\n\n<answer>4</answer>\n<|im_end|>", None, 1.0),
    ("format", {}, "<think>2+2</think> so <answer>4</answer>", None, 0.0),
    ("format", {}, "<think>2+2</think><answer>4</answer> bye", None, 0.0),
    ("format", {}, "2+2</think><answer>4</answer>", None, 0.0),
    ("format", {"require_think_start": False}, "2+2</think><answer>4</answer>", None, 1.0),
    ("format", {}, "<think>2+2</think><answer>", None, 0.0),
    ("format", {}, "", None, 0.0),
    # reasoning_steps: markers / 3, capped at 1
    ("reasoning_steps", {}, "1. add\n2. carry\n3. done", None, 1.0),
    ("reasoning_steps", {}, "Step 1: add", None, 1 / 3),
    ("reasoning_steps", {}, "First, add.\n- carry", None, 2 / 3),
    ("reasoning_steps", {}, "42", None, 0.0),
    ("reasoning_steps", {"numbered": False}, "Step 1: add", None, 0.0),
    ("reasoning_steps", {"target_steps": 1}, "Step 1: add", None, 1.0),
    ("reasoning_steps", {}, "", None, 0.0),
    # cosine: 22-character completions; at max_len the score is the long end of its range
    ("cosine", {"max_len": 22}, "<SOLUTION>4</SOLUTION>", "4", 0.8),
    ("cosine", {"max_len": 22}, "<SOLUTION>5</SOLUTION>", "4", -0.1),
    ("cosine", {"max_len": 44}, "<SOLUTION>4</SOLUTION>", "4", 0.9),
    ("cosine", {"max_len": 44}, "<SOLUTION>5</SOLUTION>", "4", -0.3),
    ("cosine", {"max_len": 11}, "<SOLUTION>4</SOLUTION>", "4", 0.8),  # past max_len stays at the end
    ("cosine", {}, "", "4", -0.5),
    # repetition_penalty: share of repeated word n-grams times max_penalty
    ("repetition_penalty", {}, "one two three four", None, 0.0),
    ("repetition_penalty", {}, "la la la la la", None, -0.1 * 2 / 3),
    ("repetition_penalty", {"ngram_size": 1, "max_penalty": -1.0}, "a A b", None, -1 / 3),
    ("repetition_penalty", {}, "too short", None, 0.0),
    ("repetition_penalty", {}, "", None, 0.0),
    # correctness: <answer> content equals the gold string
    ("correctness", {}, XML.format("72"), "72", 2.0),
    ("correctness", {"score": 1.0}, XML.format("72"), "72", 1.0),
    ("correctness", {}, XML.format("70"), "72", 0.0),
    ("correctness", {}, "72", "72", 0.0),
    ("correctness", {}, "", "72", 0.0),
    # int: the <answer> content is an integer
    ("int", {}, XML.format("72"), None, 0.5),
    ("int", {}, "<answer>-3</answer>", None, 0.5),
    ("int", {}, "<answer>7.5</answer>", None, 0.0),
    ("int", {}, "<answer>²</answer>", None, 0.0),
    ("int", {}, "", None, 0.0),
    # strict_format: the exact newline layout from the first character
    ("strict_format", {}, XML.format("72"), None, 0.5),
    ("strict_format", {}, XML.format("72").rstrip("\n"), None, 0.5),
    ("strict_format", {}, " " + XML.format("72"), None, 0.0),
    ("strict_format", {}, "<reasoning>x</reasoning>\n<answer>\n72\n</answer>\n", None, 0.0),
    ("strict_format", {}, XML.format("72") + "bye", None, 0.0),
    ("strict_format", {}, "", None, 0.0),
    # soft_format: the tags in order, whitespace between, anything after
    ("soft_format", {}, "<reasoning>a\nb</reasoning><answer>72</answer> bye", None, 0.5),
    ("soft_format", {}, "<reasoning>a</reasoning> so <answer>72</answer>", None, 0.0),
    ("soft_format", {}, "<answer>72</answer>", None, 0.0),
    ("soft_format", {}, "", None, 0.0),
    # xmlcount: 0.125 per well-placed tag, minus 0.001 per trailing character (at most 0.5)
    ("xmlcount", {}, XML.format("72"), None, 0.5),
    ("xmlcount", {}, XML.format("72") + "bye!", None, 0.496),
    ("xmlcount", {}, XML.format("72") + "x" * 10_000, None, 0.0),
    ("xmlcount", {}, "<reasoning>\nx", None, 0.125),
    ("xmlcount", {}, "", None, 0.0),
    # r1_zero: format "</think> <answer>…</answer>" and a right answer
    ("r1_zero", {}, "2+2 is 4 </think> <answer>4</answer>", "4", 1.0),
    ("r1_zero", {}, "2+2 </think> <answer>The sum is \\boxed{4}.</answer>", "4", 1.0),
    ("r1_zero", {}, "2+2 </think> <answer>5</answer>", "4", 0.0),
    ("r1_zero", {"format_weight": 0.1}, "2+2 </think> <answer>5</answer>", "4", 0.1),
    ("r1_zero", {"format_weight": 0.1}, "2+2 </think><answer>4</answer>", "4", 0.0),
    ("r1_zero", {}, "", "4", 0.0),
]


@pytest.mark.parametrize(("name", "params", "completion", "gold", "expected"), CASES)
def test_reward_scores_string_and_chat_completions(name, params, completion, gold, expected):
    reward = get_reward(name, **params)
    columns = {} if gold is None else {"answer": [gold]}
    chat = [{"role": "assistant", "content": completion}]
    assert reward(prompts=["Q"], completions=[completion], **columns) == [pytest.approx(expected)]
    assert reward(prompts=[[{"role": "user", "content": "Q"}]], completions=[chat], **columns) == [
        pytest.approx(expected)
    ]


ANSWER_REWARDS = ["check_answer", "check_numbers", "accuracy", "cosine", "correctness", "r1_zero"]


@pytest.mark.parametrize("name", ANSWER_REWARDS)
def test_answer_rewards_do_not_apply_without_an_answer_column(name):
    reward = get_reward(name)
    assert reward(prompts=["Q", "Q"], completions=[SOLVED.format("4"), ""]) == [None, None]
    assert reward(completions=[SOLVED.format("4")], answer=[None]) == [None]


@pytest.mark.parametrize("name", ["match_format_exactly", "check_answer", "accuracy", "xmlcount"])
def test_rewards_accept_trl_keywords_and_extra_columns(name):
    reward = get_reward(name)
    scores = reward(
        prompts=["Q"],
        completions=[SOLVED.format("4")],
        completion_ids=[[1, 2, 3]],
        trainer_state=object(),
        log_extra=lambda *a, **k: None,
        log_metric=lambda *a, **k: None,
        answer=["4"],
        problem=["What is 2 + 2?"],
    )
    assert len(scores) == 1 and isinstance(scores[0], float)
    assert reward(prompts=[], completions=[], answer=[]) == []


def test_completion_text_joins_multi_message_and_multimodal_content():
    reward = get_reward("match_format_exactly")
    split = [
        {"role": "assistant", "content": "x<end_working_out>"},
        {"role": "assistant", "content": [{"type": "text", "text": "<SOLUTION>4</SOLUTION>"}]},
    ]
    assert reward(completions=[split, None]) == [3.0, 0.0]


class Unprintable:
    def __str__(self):
        raise RuntimeError("cannot print")


def test_an_unreadable_completion_scores_the_minimum_and_a_lone_answer_is_repeated():
    reward = get_reward("check_answer")
    assert reward(completions=[Unprintable(), SOLVED.format("4")], answer="4") == [-2.0, 5.0]


def test_an_internal_error_scores_the_minimum_and_logs_once(monkeypatch, caplog):
    from llm_finetuning import grading
    from llm_finetuning.rewards import base

    def broken_grade(*args, **kwargs):
        raise RuntimeError("grader exploded")

    monkeypatch.setattr(grading, "grade", broken_grade)
    monkeypatch.setattr(base, "_LOGGED_ERRORS", set())
    reward = get_reward("accuracy", correct=2.0, wrong=-1.0)
    with caplog.at_level(logging.ERROR, logger="llm_finetuning.rewards.base"):
        assert reward(completions=["a", "b", "c"], answer=["1", "1", "1"]) == [-1.0, -1.0, -1.0]
    assert [r.getMessage() for r in caplog.records].count(
        "reward accuracy failed on a completion; scoring it -1.0"
    ) == 1


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("\\frac{9}{4}", "2.25"), ("2.3", "2.25"), ("x = 6", "6"), ("(1, 2)", "(2, 1)"), ("1, 2", "2, 1"),
        ("5 = 2p + q", "2p + q"), ("0.1428571428571428", "\\frac{1}{7}"), ("0.1429", "\\frac{1}{7}"),
    ],
)  # fmt: skip
def test_the_graded_check_answer_is_exact_where_evaluation_counts_the_answer_right(answer, gold):
    completion = SOLVED.format(answer)
    graded = get_reward("check_answer", preset="graded")(completions=[completion], answer=[gold])
    accuracy = get_reward("accuracy")(completions=[completion], answer=[gold])
    assert (graded == [5.0]) == (accuracy == [1.0]), (graded, accuracy)
