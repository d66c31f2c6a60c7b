"""The one scoring path on hand-written completions: per-problem rows, the figures and their names, breakdowns."""

from llm_finetuning.config import PromptConfig, RewardConfig
from llm_finetuning.evaluation.judge import CompletionJudge
from llm_finetuning.evaluation.scoring import breakdowns, figures, score_problems
from llm_finetuning.rewards import build_rewards
from llm_finetuning.rollout import Completion

RIGHT = "3 + 4 = 7<end_working_out><SOLUTION>7</SOLUTION>"
WRONG = "3 + 4 = 8<end_working_out><SOLUTION>8</SOLUTION>"
UNFORMATTED = "3 + 4 = 7, so 7"
QUESTION = [{"role": "user", "content": "What is 3 + 4?"}]


def judge() -> CompletionJudge:
    prompt = PromptConfig()
    funcs, weights = build_rewards(RewardConfig(), prompt)
    return CompletionJudge(prompt, funcs, weights)


def problems(count: int, **metadata: list) -> list[dict]:
    return [{"prompt": QUESTION, "answer": "7", **{k: v[i] for k, v in metadata.items()}} for i in range(count)]


def groups(*texts_per_problem: list[str], tokens: int = 10) -> list[list[Completion]]:
    return [[Completion(text, tokens, True) for text in texts] for texts in texts_per_problem]


def test_greedy_figures():
    results = score_problems(judge(), problems(4), groups([RIGHT], [WRONG], [UNFORMATTED], [RIGHT]))
    summary = figures(results)
    assert summary["n"] == 4 and summary["k"] == 1 and "pass@1" not in summary
    assert summary["format_accuracy"] == 0.75
    assert summary["answer_accuracy"] == 0.5  # the unformatted 7 sits in no answer slot: wrong
    assert summary["reasoning_present"] == 0.75
    assert summary["avg_reasoning_length"] == (9 + 9 + 0 + 9) / 4
    assert [row["correct"] for row in results] == [[True], [False], [False], [True]]
    assert results[0]["extracted_answers"] == ["7"]
    # the Unsloth GRPO notebook's four rewards: a perfect completion scores their maximum, 12.5
    assert results[0]["total_reward"] == [12.5]


def test_k_samples_give_avg_at_k_and_pass_at_k():
    results = score_problems(judge(), problems(4), groups([RIGHT, WRONG], [RIGHT, WRONG], [WRONG] * 2, [WRONG] * 2))
    summary = figures(results)
    assert summary["answer_accuracy"] == 0.25  # (0.5 + 0.5 + 0 + 0) / 4
    assert summary["pass@2"] == 0.5


def test_weighted_total_is_the_sum_grpo_optimises():
    weighted = CompletionJudge(PromptConfig(), reward_weights=[1.0, 0.5])
    assert weighted.total_rewards({"a": [1.0, 0.0], "b": [2.0, -1.0]}) == [2.0, -0.5]


def test_lengths_truncation_and_breakdowns_by_subject():
    rows = problems(3, subject=["algebra", "algebra", "geometry"])
    completions = [[Completion(RIGHT, 10, True), Completion(WRONG, 20, False)],
                   [Completion(WRONG, 30, True), Completion(UNFORMATTED, 40, True)],
                   [Completion(RIGHT, 5, True), Completion(RIGHT, 5, True)]]  # fmt: skip
    results = score_problems(judge(), rows, completions)
    summary = figures(results)
    assert summary["answer_accuracy"] == 0.5 and summary["pass@2"] == 0.6667
    assert summary["format_accuracy"] == 0.8333 and summary["avg_completion_tokens"] == 18.33
    assert summary["truncation_rate"] == 0.1667
    tables = breakdowns(results)
    assert set(tables) == {"subject"}  # no level column
    assert tables["subject"]["algebra"] == {"n": 2, "answer_accuracy": 0.25, "format_accuracy": 0.75,
                                            "pass@2": 0.5, "avg_completion_tokens": 25.0}  # fmt: skip
    assert tables["subject"]["geometry"]["pass@2"] == 1.0
