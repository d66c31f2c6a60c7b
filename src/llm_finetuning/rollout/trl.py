"""TRL's colocated vLLM engine (hf backend, ``use_vllm`` with ``vllm_mode: colocate``): started by TRL, owned here.

TRL's GRPOTrainer starts a vLLM engine in this process when it is built and pushes the training weights into it
before each generation. Around that, and nowhere inside TRL on a GPU:

- ``trl_engine_start``: the owner's engine makes way first (never two engines on one device); TRL's engine is
  started with the log-prob mode the importance-sampling rule chose (``rollout/importance.py``: TRL hard-codes processed
  log-probs, which under a sampling filter stop GRPO learning), in the training weights' dtype (TRL passes
  none, and vLLM would take the checkpoint's) and, on a CPU, eager as ours is (left to vLLM it
  compiles the model first: 84 s against 5 s to start SmolLM2-135M in bf16, for 561 against 462 tokens/s, which
  repays the start only after about 200,000 generated tokens) with KV blocks small enough that a group's shared
  prompt is computed once (``hardware.vllm_device_arguments``); the launcher variables TRL sets for vLLM are
  restored afterwards (a LOCAL_RANK left behind would make the next trainer's accelerate state distributed), and
  vLLM's CPU build gets a KV cache sized as the run's own engine's (``hardware.vllm_kv_cache_arguments``); the
  engine runs up to ``EVALUATION_SEQS`` sequences at once (TRL sizes it to one training batch, 32 here, and
  evaluation's hundreds of requests then queue: 1.25-1.3x slower on the CPU build, docs/benchmarks.md), and an
  evaluation's call runs as many of them as the cache holds to their last token (``admission.py``); rollouts
  of a batch schedule as before; on vLLM's CPU build, evaluation's min_p samples on it are drawn among the tokens
  min_p keeps (``min_p_draws.py``; rollouts ask for log-probs and keep vLLM's sampler);
- ``adopt``: in a single-process run the ``EngineOwner`` takes the engine, so evaluation during and after GRPO
  generates on it and the run's end tears it down (in a multi-process launch TRL keeps it: vLLM's teardown
  would take the launch's process group with it);
- on vLLM's CPU build only, ``sync_weights`` of that one trainer is replaced: TRL pushes each weight through
  ``load_weights``, which fails there (``'Parameter' object has no attribute 'weight_loader'``: the CPU backend
  repacks linear weights after loading). The replacement keeps TRL's own walk over the weights (PEFT merge,
  names) and loads them the way ``weights.push_weights`` does on a CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..model.hardware import empty_cuda_cache, vllm_device_arguments, vllm_kv_cache_arguments
from ..runtime.logging_setup import libraries_verbose
from ..runtime.trl_patches import replace_method
from .min_p_draws import use_min_p_draws
from .owner import EngineOwner
from .start import native_output_to_log, single_process_launch, stdout_with_a_descriptor
from .weights import model_weights, push_weights

__all__ = ["EVALUATION_SEQS", "adopt", "trl_engine_start"]

EVALUATION_SEQS = 256  # what vLLM's LLM class runs at once by default on a CPU (the run's own engine's capacity)


@contextmanager
def trl_engine_start(owner: EngineOwner, logprobs_mode: str | None) -> Iterator[bool]:
    """Wrap the construction of a GRPOTrainer that starts TRL's colocated engine, whose vLLM reports
    ``logprobs_mode`` (None: TRL's own choice); yields whether a torch process group existed before it (a
    multi-process launch's)."""
    import trl.generation.vllm_generation as trl_generation

    owner.shutdown()
    process_group_existed = torch.distributed.is_available() and torch.distributed.is_initialized()
    set_num_threads, trl_llm = torch.set_num_threads, trl_generation.LLM  # vLLM's CPU worker replaces the first
    # TRL passes no dtype, so vLLM would take the checkpoint's (fp32 for a converted GGUF: twice the weights'
    # memory, and on SmolLM2 256 against 462 tokens/s at large batches; at GRPO's 32 completions within noise):
    # the engine computes in the training weights' dtype, as ours does
    overrides: dict[str, Any] = {"dtype": owner.dtype}
    if logprobs_mode is not None:
        overrides["logprobs_mode"] = logprobs_mode
    device = vllm_device_arguments(sleep_mode=False)
    if device["enforce_eager"]:  # TRL's own choice elsewhere
        overrides["enforce_eager"] = True
    if device["block_size"] is not None:  # prompts reused across a group's draws and evaluation's problems
        overrides["block_size"] = device["block_size"]
    overrides["use_tqdm_on_load"] = libraries_verbose()  # its weight-loading bar is for --verbose
    trl_generation.LLM = functools.partial(_llm_with, trl_llm, overrides)
    try:
        with single_process_launch(), stdout_with_a_descriptor(), native_output_to_log():
            yield process_group_existed
    finally:
        torch.set_num_threads = set_num_threads
        trl_generation.LLM = trl_llm


def _llm_with(llm_class: type, overrides: dict[str, Any], /, **arguments: Any) -> Any:
    """``vllm.LLM`` as TRL builds it, with ``overrides`` in place of what TRL passes and room for evaluation."""
    seqs = max(arguments.get("max_num_seqs") or 0, EVALUATION_SEQS)
    arguments = {**arguments, **overrides, "max_num_seqs": seqs}
    cache = vllm_kv_cache_arguments(arguments["model"], arguments.get("max_model_len") or 0, arguments["dtype"])
    llm = llm_class(**arguments, **cache)
    use_min_p_draws(llm)  # evaluation's min_p samples on this engine drawn among the kept tokens (CPU build only)
    return llm


def adopt(trainer: Any, owner: EngineOwner, process_group_existed: bool) -> None:
    """Hand TRL's engine to ``owner`` with our weight sync (one process only); in a multi-process launch keep
    TRL's walk, loaded the CPU build's way there."""
    from vllm.platforms import current_platform

    generation = trainer.vllm_generation
    if process_group_existed:
        if current_platform.is_cpu():
            replace_method(generation, "sync_weights", _sync_walk_on_cpu)
        return
    owner.adopt(generation.llm, "trl")
    replace_method(generation, "sync_weights", _sync_folded)


def _sync_folded(generation: Any) -> None:
    """TRL's ``VLLMGeneration.sync_weights`` for a colocated engine the run owns: ``model_weights``, all of them
    the first time and whenever sleep mode discarded them, else only those training changes."""
    if generation.enable_sleep_mode:  # as TRL does: map the weights' memory back before loading into it
        empty_cuda_cache()
        generation.llm.wake_up(tags=["weights"])
        generation._llm_weights_sleeping = False
    changing_only = getattr(generation, "_pushed_before", False) and not generation.enable_sleep_mode
    push_weights(generation.llm, model_weights(generation.model, changing_only=changing_only))
    generation._pushed_before = True


def _sync_walk_on_cpu(generation: Any) -> None:
    """TRL's own walk over the weights (it gathers partitioned ones in a launch), loaded the CPU build's way."""
    push_weights(generation.llm, generation._iter_named_params())
