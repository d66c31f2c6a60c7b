"""The evaluator's sampled figure depends on the model alone: every call draws from the same seeded generator,
and training's random stream is left where it was."""

import dataclasses
from types import SimpleNamespace

import torch
from transformers import AutoModelForCausalLM

from llm_finetuning.config import PromptConfig
from llm_finetuning.evaluation.evaluator import Evaluator
from llm_finetuning.evaluation.judge import CompletionJudge
from llm_finetuning.rollout import SamplingSettings
from llm_finetuning.rollout.engines import HFEngine

PROBLEMS = [{"prompt": [{"role": "user", "content": f"What is {a} + 4?"}], "answer": str(a + 4)} for a in range(3)]


def test_sampled_evaluation_draws_the_same_samples_whatever_ran_before(tiny_base, tiny_tokenizer, monkeypatch):
    model = AutoModelForCausalLM.from_pretrained(tiny_base)  # random weights: samples differ with the seed
    engine = HFEngine(SimpleNamespace(model=model, tokenizer=tiny_tokenizer))
    evaluator = Evaluator(
        PROBLEMS, CompletionJudge(PromptConfig()), SamplingSettings(greedy=True, max_new_tokens=8),
        SamplingSettings(greedy=False, num_samples=3, max_new_tokens=8, seed=7),
    )  # fmt: skip
    drawn, score = [], evaluator.score

    def recording(engine, label, *, sampled=False, progress=None):
        rows = score(engine, label, sampled=sampled, progress=progress)
        if sampled:
            drawn.append([row["completions"] for row in rows])
        return rows

    monkeypatch.setattr(evaluator, "score", recording)
    torch.manual_seed(1)
    evaluator.evaluate(engine, "first")
    torch.rand(100)  # training moved the global generator on
    state = torch.random.get_rng_state()
    evaluator.evaluate(engine, "second")
    assert drawn[0] == drawn[1]
    assert torch.equal(torch.random.get_rng_state(), state)  # the evaluation did not move it

    evaluator.sampled = dataclasses.replace(evaluator.sampled, seed=8)
    evaluator.evaluate(engine, "other seed")
    assert drawn[2] != drawn[0]
