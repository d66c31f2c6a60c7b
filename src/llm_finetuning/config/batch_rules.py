"""GRPO's batch arithmetic across processes, checked before any model loads (TRL 1.15's rules, our messages).

GRPO samples ``num_generations`` completions per prompt and compares them within the group, so every
generation round must hold whole groups. TRL computes that round's size from the batch settings *and the
number of processes* and refuses a bad combination only once its trainer is built, minutes into a run;
``grpo_batch`` applies the same rules (``trl/trainer/grpo_config.py`` ``__post_init__`` and the colocated
vLLM check in ``trl/generation/vllm_generation.py``) up front, with one line that names the numbers:

    >>> grpo_batch(per_device_train_batch_size=8, gradient_accumulation_steps=1, num_generations=8,
    ...            num_processes=2).prompts_per_generation
    2
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PipelineError

__all__ = ["GRPOBatch", "grpo_batch"]


@dataclass(frozen=True)
class GRPOBatch:
    """How one GRPO generation round is laid out over the processes."""

    num_generations: int  # completions per prompt (the group)
    num_processes: int
    generation_batch_size: int  # completions generated per round, all processes together
    steps_per_generation: int  # micro-batches trained on one round's completions

    @property
    def prompts_per_generation(self) -> int:
        return self.generation_batch_size // self.num_generations


def grpo_batch(
    per_device_train_batch_size: int,
    gradient_accumulation_steps: int,
    num_generations: int,
    num_processes: int,
    *,
    generation_batch_size: int | None = None,
    steps_per_generation: int | None = None,
    vllm_colocate_tensor_parallel_size: int | None = None,
) -> GRPOBatch:
    """The generation round TRL will use with these settings; a ``PipelineError`` naming the numbers if invalid.

    ``vllm_colocate_tensor_parallel_size`` is given only when vLLM runs colocated in the training processes.
    """
    if num_generations < 2:
        raise PipelineError(
            f"grpo_training.num_generations: must be >= 2, GRPO compares completions within a group "
            f"(got {num_generations})"
        )
    generation_batch_size, steps_per_generation, formula = _generation_round(
        per_device_train_batch_size, gradient_accumulation_steps, num_processes, generation_batch_size,
        steps_per_generation,
    )
    if generation_batch_size % num_generations:
        raise PipelineError(
            f"grpo_training.num_generations: the generation batch {formula} must be divisible by num_generations = "
            f"{num_generations}; change num_generations or the batch settings"
        )
    tensor_parallel = vllm_colocate_tensor_parallel_size
    if tensor_parallel is not None and num_processes % tensor_parallel:
        raise PipelineError(
            f"grpo_training.vllm_tensor_parallel_size: {tensor_parallel} must divide the number of processes "
            f"{num_processes} (colocated vLLM groups the processes by it)"
        )
    return GRPOBatch(num_generations, num_processes, generation_batch_size, steps_per_generation)


def _generation_round(per_device_train_batch_size: int, gradient_accumulation_steps: int, num_processes: int,
                      generation_batch_size: int | None, steps_per_generation: int | None) -> tuple[int, int, str]:
    """TRL's generation batch and steps per generation from whichever of the two is set (else the accumulation
    steps), and how the batch was worked out (for an error message)."""
    global_batch = per_device_train_batch_size * num_processes
    per_round = f"per_device_train_batch_size x num_processes = {per_device_train_batch_size} x {num_processes}"
    if generation_batch_size is not None and steps_per_generation is not None:
        raise PipelineError(
            "grpo_training: set generation_batch_size or steps_per_generation, not both (TRL derives one from the other)"
        )
    if generation_batch_size is not None:
        if generation_batch_size % global_batch:
            raise PipelineError(
                f"grpo_training.generation_batch_size: {generation_batch_size} must be a multiple of the global "
                f"batch {per_round} = {global_batch}"
            )
        return generation_batch_size, generation_batch_size // global_batch, f"generation_batch_size = {generation_batch_size}"
    steps_name = "gradient_accumulation_steps" if steps_per_generation is None else "steps_per_generation"
    steps_per_generation = steps_per_generation or gradient_accumulation_steps  # TRL's default
    generation_batch_size = global_batch * steps_per_generation
    formula = (f"per_device_train_batch_size x num_processes x {steps_name} = {per_device_train_batch_size} x "
               f"{num_processes} x {steps_per_generation} = {generation_batch_size}")
    return generation_batch_size, steps_per_generation, formula
