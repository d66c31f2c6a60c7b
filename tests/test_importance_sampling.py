"""GRPO's importance-sampling correction follows one rule on every rollout engine: on only where the engine
reports the trainer's own distribution (``rollout/importance.py``).

With a sampling filter (the default ``min_p: 0.1``) vLLM's processed log-probs are the filtered distribution's,
larger than the trainer's by the dropped mass on every token; TRL's default sequence-level correction then
weights each completion by about exp(-tokens x gap), near zero, and GRPO stops learning. The vLLM lane runs
the default recipe on TRL's colocated engine and asserts weights near 1 (tests/test_vllm_pipeline.py).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from llm_finetuning.config import ConfigError, PipelineConfig
from llm_finetuning.model import get_backend
from llm_finetuning.rollout import ROLLOUTS, importance_sampling
from llm_finetuning.runtime.hardware import Machine
from llm_finetuning.session.plan import RunPlan
from llm_finetuning.training.arguments import check_trainer_settings, grpo_arguments

DEFAULT = []  # min_p 0.1 at temperature 1
NO_FILTER = ["grpo_training.min_p=0.0"]
HOT = ["grpo_training.temperature=0.7"]  # min_p 0.1 at temperature 0.7


def config(*overrides: str) -> PipelineConfig:
    return PipelineConfig().with_overrides(list(overrides))


@pytest.mark.parametrize(
    ("rollouts", "overrides", "correction", "engine_logprobs"),
    [
        ("generate", DEFAULT, False, None),  # model.generate: no engine to correct for
        ("trl_colocate", DEFAULT, True, "raw_logprobs"),  # raw log-probs at temperature 1 are the trainer's
        ("trl_colocate", NO_FILTER, True, "processed_logprobs"),  # TRL's own choice is right without a filter
        ("trl_colocate", HOT, False, None),  # no vLLM mode reports the trainer's distribution here
        ("trl_colocate", [*HOT, "grpo_training.min_p=0.0"], True, "processed_logprobs"),
        ("trl_colocate", ["grpo_training.min_p=0.0", "grpo_training.top_k=20"], True, "raw_logprobs"),
        ("trl_colocate", ["grpo_training.min_p=0.0", "grpo_training.top_p=0.9"], True, "raw_logprobs"),
        ("model_engine", DEFAULT, False, None),  # Unsloth's engine reports processed log-probs: its mode is its own
        ("model_engine", NO_FILTER, True, None),
        ("trl_server", DEFAULT, False, None),
        ("trl_server", NO_FILTER, True, None),
    ],
)
def test_the_correction_is_on_only_where_the_engine_reports_the_trainers_distribution(
    rollouts, overrides, correction, engine_logprobs
):
    decision = importance_sampling(config(*overrides), ROLLOUTS[rollouts])
    assert (decision.correction, decision.engine_logprobs) == (correction, engine_logprobs)
    assert decision.reason.startswith("on: " if correction else ("off: " if rollouts != "generate" else "GRPO"))


def test_turned_off_by_the_config_it_stays_off_with_the_engine_still_told_its_mode():
    decision = importance_sampling(config("grpo_training.vllm_importance_sampling_correction=false"),
                                   ROLLOUTS["trl_colocate"])
    assert (decision.correction, decision.engine_logprobs, decision.reason) == (False, "raw_logprobs",
                                                                              "off, as configured")


@pytest.mark.parametrize(("rollouts", "overrides"), [("trl_colocate", HOT), ("model_engine", DEFAULT),
                                                     ("trl_server", DEFAULT)])  # fmt: skip
def test_asking_for_the_correction_where_it_would_zero_every_completion_is_one_line_error(rollouts, overrides):
    asked = config(*overrides, "grpo_training.vllm_importance_sampling_correction=true")
    with pytest.raises(ConfigError) as info:
        importance_sampling(asked, ROLLOUTS[rollouts])
    message = str(info.value)
    assert message.startswith("grpo_training.vllm_importance_sampling_correction: true, but ")
    assert "grpo_training.min_p: 0" in message and "\n" not in message


@pytest.fixture
def cuda_bf16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # for the precision rules (model/hardware.py)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)


@pytest.mark.usefixtures("cuda_bf16")
@pytest.mark.parametrize(("backend", "rollouts", "correction"), [("hf", "trl_colocate", True),
                                                                 ("unsloth", "model_engine", False)])  # fmt: skip
def test_the_default_recipe_on_a_gpu_gets_the_rules_correction_on_either_backend(tmp_path, backend, rollouts,
                                                                                   correction):
    chosen = get_backend(backend, machine=Machine(cuda=True, vllm_problem=None))  # vLLM's CUDA build loads
    recipe = PipelineConfig.from_yaml("configs/default_config.yaml", ["sft_training.optim=adamw_torch",
                                                                     "grpo_training.optim=adamw_torch"])
    plan = RunPlan.resolve(recipe, chosen)
    assert plan.rollouts == rollouts
    check_trainer_settings(recipe, plan)
    arguments = grpo_arguments(recipe, tmp_path, plan, 64, [1.0] * 4)
    assert arguments["use_vllm"] is True and arguments["min_p"] == 0.1
    # before the rule: True on both (the Unsloth path forced TRL's default), zeroing the weights under min_p
    assert arguments["vllm_importance_sampling_correction"] is correction


def test_trls_engine_is_started_reporting_the_mode_the_rule_chose(monkeypatch, tiny_base):
    import trl.generation.vllm_generation as trl_generation

    from llm_finetuning.rollout.trl import EVALUATION_SEQS, trl_engine_start
    from llm_finetuning.session import Session

    built = []
    def stand_in(**arguments):  # an engine whose sampler the CPU build's routing can reach, vLLM installed or not
        built.append(arguments)
        return SimpleNamespace(collective_rpc=lambda call: None)

    monkeypatch.setattr(trl_generation, "LLM", stand_in, raising=False)
    owner = Session.open(PipelineConfig()).engines
    for mode, seqs in (("raw_logprobs", 32), (None, 512)):  # TRL's max_num_seqs: one training batch
        with trl_engine_start(owner, mode):
            trl_generation.LLM(model=str(tiny_base), logprobs_mode="processed_logprobs", max_num_seqs=seqs,
                               max_model_len=512)  # as TRL calls it  # fmt: skip
    assert [arguments["logprobs_mode"] for arguments in built] == ["raw_logprobs", "processed_logprobs"]
    assert built[0]["model"] == str(tiny_base)
    assert [arguments["max_num_seqs"] for arguments in built] == [EVALUATION_SEQS, 512]  # room for evaluation
    eager = [arguments.get("enforce_eager") for arguments in built]
    assert eager == ([None, None] if torch.cuda.is_available() else [True, True])  # a CPU: eager, as ours is
    blocks = [arguments.get("block_size") for arguments in built]
    assert blocks == ([None, None] if torch.cuda.is_available() else [32, 32])  # a CPU: prompts cached, as ours
    from llm_finetuning.model.hardware import CPU_KV_CACHE_BYTES

    cache = [arguments.get("kv_cache_memory_bytes") for arguments in built]
    assert cache == ([None, None] if torch.cuda.is_available() else [CPU_KV_CACHE_BYTES] * 2)  # sized as ours
    trained = Session.open(PipelineConfig()).plan.precision.weights_name  # TRL passes none: the checkpoint's
    assert [arguments["dtype"] for arguments in built] == [trained, trained]


def test_trl_still_starts_its_engine_with_a_logprobs_mode_keyword():
    """The override replaces a keyword of TRL's own ``LLM(...)`` call (trl/generation/vllm_generation.py)."""
    import inspect

    import trl.generation.vllm_generation as trl_generation

    source = inspect.getsource(trl_generation)
    assert 'logprobs_mode="processed_logprobs"' in source and "self.llm = LLM(" in source


LOGPS = [[-1.0, -2.0, -0.5]]  # the trainer's, for one completion of three tokens
SAMPLED = [[-1.1, -1.5, -0.5]]  # vLLM's: the second token's gap is 0.5, the third is padding (masked)
MASK = [[1.0, 1.0, 0.0]]


@pytest.mark.parametrize(
    ("mode", "clip_min", "clip_max", "expected"),
    [
        ("token_truncate", None, 3.0, [[math.exp(0.1), math.exp(-0.5), 1.0]]),
        ("token_truncate", 0.7, 3.0, [[math.exp(0.1), 0.7, 1.0]]),
        ("token_mask", 0.7, 3.0, [[math.exp(0.1), 0.0, 1.0]]),
        ("sequence_truncate", None, 3.0, [[math.exp(-0.4)]]),
        ("sequence_mask", None, 0.5, [[0.0]]),  # 0.67 above C_max: the sequence is masked out
        ("sequence_mask", None, 3.0, [[math.exp(-0.4)]]),  # TRL's default mode and bounds
        ("sequence_mask", 0.7, 3.0, [[0.0]]),  # below C_min: the sequence is masked out
    ],
)
def test_the_ratio_in_the_loss_is_trls_for_every_mode(mode, clip_min, clip_max, expected):
    from llm_finetuning.training.importance import importance_ratio

    ratio = importance_ratio(torch.tensor(LOGPS), torch.tensor(SAMPLED), torch.tensor(MASK), mode, clip_min, clip_max)
    torch.testing.assert_close(ratio, torch.tensor(expected))


@pytest.mark.parametrize(("iterations", "per_generation", "accumulation", "correction", "loss", "applies"), [
    (1, 1, 1, True, "dapo", True),
    (1, 2, 2, True, "dapo", True),  # one optimizer step per generated batch
    (2, 1, 1, True, "dapo", False),  # a batch reused: the second pass's old log-probs are not its own
    (1, 2, 1, True, "dapo", False),  # generated every other step: the weights move in between
    (1, 1, 1, False, "dapo", False),
    (1, 1, 1, True, "vespo", False),  # vespo weighs sequences itself
])  # fmt: skip
def test_the_loss_pass_replaces_trls_extra_pass_only_where_its_log_probs_are_the_old_ones(
    iterations, per_generation, accumulation, correction, loss, applies
):
    from types import SimpleNamespace

    from llm_finetuning.training.importance import applies as applies_to

    trainer = SimpleNamespace(use_vllm=True, vllm_importance_sampling_correction=correction, num_iterations=iterations,
                              loss_type=loss, args=SimpleNamespace(steps_per_generation=per_generation,
                                                                   gradient_accumulation_steps=accumulation))  # fmt: skip
    assert applies_to(trainer) is applies
