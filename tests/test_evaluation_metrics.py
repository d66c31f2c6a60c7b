"""The evaluation figures from hand-written completions: format, greedy and sampled accuracy, reasoning."""

from llm_finetuning.config import PromptConfig, RewardConfig
from llm_finetuning.evaluation.metrics import CompletionJudge, summarize
from llm_finetuning.rewards import build_rewards

RIGHT = "3 + 4 = 7<end_working_out><SOLUTION>7</SOLUTION>"
WRONG = "3 + 4 = 8<end_working_out><SOLUTION>8</SOLUTION>"
UNFORMATTED = "3 + 4 = 7, so 7"


def judge() -> CompletionJudge:
    prompt = PromptConfig()
    funcs, weights = build_rewards(RewardConfig(), prompt)
    return CompletionJudge(prompt, funcs, weights)


def test_greedy_figures_and_sampled_average():
    figures, rows = summarize(judge(), [RIGHT, WRONG, UNFORMATTED, RIGHT], [[RIGHT, WRONG]] * 2 + [[WRONG] * 2] * 2,
                              ["7", "7", "7", "7"])
    assert figures["n"] == 4
    assert figures["format_accuracy"] == 0.75
    assert figures["answer_accuracy"] == 0.5  # the unformatted 7 sits in no answer slot: wrong
    assert figures["sampled_answer_accuracy"] == 0.25  # (0.5 + 0.5 + 0 + 0) / 4
    assert figures["reasoning_present"] == 0.75
    assert figures["avg_reasoning_length"] == (9 + 9 + 0 + 9) / 4
    assert [row["correct"] for row in rows] == [True, False, False, True]
    # seed rewards: the perfect completion scores the seed's maximum, 12.5
    assert rows[0]["total_reward"] == 12.5


def test_no_samples_means_no_sampled_figure():
    figures, _ = summarize(judge(), [RIGHT, WRONG], None, ["7", "7"])
    assert figures["answer_accuracy"] == 0.5
    assert figures["sampled_answer_accuracy"] is None  # not a copy of the greedy figure
