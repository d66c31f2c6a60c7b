"""Activation checkpointing on a CPU: as configured, and the same training either way.

On a CPU it trades step time for RAM (SmolLM2-135M's GRPO: peak 9.1 -> 6.1 GiB, docs/benchmarks.md); the
recomputed forward gives the same activations, so the losses, gradients and the adapter must not change.
"""

from __future__ import annotations

import json

import pytest

LORA = "model.lora={rank: 4, alpha: 8, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"


def test_grpo_with_lora_trains_the_same_with_and_without_checkpointing(tmp_path, tiny_config):
    from safetensors.torch import load_file

    from llm_finetuning.pipeline import RunOptions, run

    runs = {}
    for checkpointing in (True, False):
        folder = tmp_path / str(checkpointing)
        config = tiny_config(LORA, "model.dtype=float32", "grpo_training.max_steps=2",
                             "grpo_training.per_device_train_batch_size=4", "grpo_training.gradient_accumulation_steps=2",
                             "grpo_training.num_generations=4",
                             "grpo_training.max_completion_length=12", "grpo_training.beta=0.04",
                             "grpo_training.logging_steps=1", "evaluation.enabled=false",
                             f"model.gradient_checkpointing={str(checkpointing).lower()}", output_dir=folder)  # fmt: skip
        summary = run(config, RunOptions(skip_sft=True))
        # what the trainer used, as recorded
        assert summary["phases"]["grpo"]["settings"]["gradient_checkpointing"] is checkpointing
        records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in records if r.get("phase") == "grpo" and "loss" in r]
        runs[checkpointing] = steps, load_file(folder / "grpo_saved_lora" / "adapter_model.safetensors")
    (on_steps, on_adapter), (off_steps, off_adapter) = runs[True], runs[False]
    assert len(on_steps) == len(off_steps) == 2
    for on, off in zip(on_steps, off_steps, strict=True):
        assert on["reward"] == off["reward"]  # the same rollouts
        assert on["grad_norm"] == pytest.approx(off["grad_norm"], rel=1e-5)
        assert on["loss"] == pytest.approx(off["loss"], abs=1e-6)
    # something was learned, so the equal adapters below mean something
    assert any(step["grad_norm"] > 0 for step in on_steps)
    assert on_adapter.keys() == off_adapter.keys()
    assert max((on_adapter[k] - off_adapter[k]).abs().max().item() for k in on_adapter) < 1e-6


def test_a_phase_of_its_own_checkpoints_alone_and_the_model_follows_each_phase(tmp_path, tiny_config, monkeypatch):
    from llm_finetuning.model.backend import Backend
    from llm_finetuning.pipeline import RunOptions, run

    asked: list[bool] = []  # what each phase set on the model before its trainer was built (the real call runs)
    real = Backend.checkpoint_activations
    monkeypatch.setattr(Backend, "checkpoint_activations",
                        lambda self, model, on: (asked.append(on), real(self, model, on))[1])  # fmt: skip

    config = tiny_config(LORA, "model.gradient_checkpointing=true", "sft_training.gradient_checkpointing=false",
                         "sft_training.max_steps=2", "grpo_training.max_steps=1", "evaluation.enabled=false")  # fmt: skip
    summary = run(config, RunOptions())
    phases = summary["phases"]
    assert phases["sft"]["settings"]["gradient_checkpointing"] is False
    assert phases["grpo"]["settings"]["gradient_checkpointing"] is True
    assert asked == [True, False, True]  # loading (the model's setting), then SFT's own, then GRPO's (the model's)


def test_the_backend_turns_the_models_checkpointing_on_and_off(tiny_config):
    from llm_finetuning.session import Session

    manager = Session.open(tiny_config(LORA, "model.gradient_checkpointing=true")).manager
    manager.load()
    model, backend = manager.model, manager.backend
    assert model.is_gradient_checkpointing  # as loaded
    backend.checkpoint_activations(model, False)
    assert not model.is_gradient_checkpointing and model.config.use_cache
    backend.checkpoint_activations(model, True)
    assert model.is_gradient_checkpointing and not model.config.use_cache
