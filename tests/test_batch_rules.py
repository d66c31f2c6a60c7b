"""GRPO's batch rules across processes: the layouts TRL 1.15 accepts, and one-line refusals naming the numbers.

Each accepted case is checked against TRL's own ``GRPOConfig`` arithmetic (its ``__post_init__`` with the same
world size), so the rules cannot drift from the trainer's.
"""

from __future__ import annotations

from unittest import mock

import pytest

from llm_finetuning.config.batch_rules import GRPOBatch, grpo_batch
from llm_finetuning.errors import PipelineError


@pytest.mark.parametrize("settings, expected", [
    # per_device, accumulation, generations, processes -> round size, steps per round
    ((32, 1, 8, 1), GRPOBatch(8, 1, 32, 1)),      # the tiny demo in one process
    ((32, 1, 8, 2), GRPOBatch(8, 2, 64, 1)),      # ... and in two
    ((2, 1, 4, 2), GRPOBatch(4, 2, 4, 1)),        # one group split over two processes
    ((1, 2, 2, 1), GRPOBatch(2, 1, 2, 2)),        # the default config
    ((4, 3, 6, 2), GRPOBatch(6, 2, 24, 3)),
    ((1, 4, 8, 8), GRPOBatch(8, 8, 32, 4)),       # eight GPUs
])
def test_accepted_layouts_match_trl(settings, expected):
    per_device, accumulation, generations, processes = settings
    batch = grpo_batch(per_device, accumulation, generations, processes)
    assert batch == expected
    assert batch.prompts_per_generation * generations == batch.generation_batch_size
    assert _trl_layout(per_device, accumulation, generations, processes) == (
        batch.generation_batch_size, batch.steps_per_generation)


@pytest.mark.parametrize("settings, extra, message", [
    ((2, 1, 4, 1), {}, "x gradient_accumulation_steps = 2 x 1 x 1 = 2 must be divisible by num_generations = 4"),
    ((4, 1, 1, 2), {}, "num_generations: must be >= 2"),
    ((4, 1, 4, 2), {"generation_batch_size": 12}, "12 must be a multiple of the global batch "),
    ((4, 1, 4, 2), {"generation_batch_size": 12}, "per_device_train_batch_size x num_processes = 4 x 2 = 8"),
    ((4, 1, 6, 2), {"generation_batch_size": 16}, "generation_batch_size = 16 must be divisible by num_generations = 6"),
    ((4, 1, 4, 2), {"generation_batch_size": 8, "steps_per_generation": 1}, "not both"),
    ((3, 1, 4, 1), {"steps_per_generation": 2}, "steps_per_generation = 3 x 1 x 2 = 6 must be divisible by num_gen"),
    ((4, 1, 4, 2), {"vllm_colocate_tensor_parallel_size": 4}, "4 must divide the number of processes 2"),
])
def test_refusals_name_the_numbers(settings, extra, message):
    with pytest.raises(PipelineError, match=_literal(message)) as caught:
        grpo_batch(*settings, **extra)
    assert "\n" not in str(caught.value)


def test_a_layout_valid_in_one_process_can_fail_in_three():
    assert grpo_batch(16, 1, 8, 1).generation_batch_size == 16
    with pytest.raises(PipelineError, match=r"16 x 3 x 1 = 48 must be divisible by num_generations = 32"):
        grpo_batch(16, 1, 32, 3)


def test_explicit_round_sizes_match_trl():
    assert grpo_batch(4, 1, 4, 2, generation_batch_size=16) == GRPOBatch(4, 2, 16, 2)
    assert _trl_layout(4, 1, 4, 2, generation_batch_size=16) == (16, 2)
    assert grpo_batch(4, 1, 4, 2, steps_per_generation=3) == GRPOBatch(4, 2, 24, 3)
    assert _trl_layout(4, 1, 4, 2, steps_per_generation=3) == (24, 3)


def _trl_layout(per_device, accumulation, generations, processes, **extra) -> tuple[int, int]:
    from trl import GRPOConfig

    # TRL reads the world size from the process group; stand in for a launch of `processes` ranks.
    with mock.patch.object(GRPOConfig, "world_size", new=processes):
        config = GRPOConfig(output_dir="unused", per_device_train_batch_size=per_device, use_cpu=True,
                            gradient_accumulation_steps=accumulation, num_generations=generations, report_to=[],
                            bf16=False, **extra)
    return config.generation_batch_size, config.steps_per_generation


def _literal(text: str) -> str:
    import re

    return re.escape(text)
