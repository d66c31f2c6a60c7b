"""TRL's colocated vLLM engine (hf backend, ``use_vllm`` with ``vllm_mode: colocate``): started by TRL, owned here.

TRL's GRPOTrainer starts a vLLM engine in this process when it is built and pushes the training weights into it
before each generation. Around that, and nowhere inside TRL on a GPU:

- ``trl_engine_start``: the owner's engine makes way first (never two engines on one device); TRL's engine is
  started with the log-prob mode the importance-sampling rule chose (``logprobs.py``: TRL hard-codes processed
  log-probs, which under a sampling filter stop GRPO learning); the launcher variables TRL sets for vLLM are
  restored afterwards (a LOCAL_RANK left behind would make the next trainer's accelerate state distributed), and
  vLLM's CPU build gets a KV cache sized for its job;
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
import os
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..model.hardware import on_cuda
from .owner import EngineOwner
from .start import CPU_KV_CACHE_GIB, single_process_launch
from .weights import push_weights

__all__ = ["adopt", "trl_engine_start"]


@contextmanager
def trl_engine_start(owner: EngineOwner, logprobs_mode: str | None) -> Iterator[bool]:
    """Wrap the construction of a GRPOTrainer that starts TRL's colocated engine, whose vLLM reports
    ``logprobs_mode`` (None: TRL's own choice); yields whether a torch process group existed before it (a
    multi-process launch's)."""
    import trl.generation.vllm_generation as trl_generation

    owner.shutdown()
    process_group_existed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if not on_cuda():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
    set_num_threads, trl_llm = torch.set_num_threads, trl_generation.LLM  # vLLM's CPU worker replaces the first
    if logprobs_mode is not None:
        trl_generation.LLM = functools.partial(_llm_reporting, trl_llm, logprobs_mode)
    try:
        with single_process_launch():
            yield process_group_existed
    finally:
        torch.set_num_threads = set_num_threads
        trl_generation.LLM = trl_llm


def _llm_reporting(llm_class: type, mode: str, /, **arguments: Any) -> Any:
    """``vllm.LLM`` as TRL builds it, reporting log-probs in ``mode`` instead of the mode TRL passes."""
    return llm_class(**{**arguments, "logprobs_mode": mode})


def adopt(trainer: Any, owner: EngineOwner, process_group_existed: bool) -> None:
    """Hand TRL's engine to ``owner`` (one process only); on vLLM's CPU build give the trainer a weight sync
    that works there."""
    generation = trainer.vllm_generation
    if not process_group_existed:
        owner.adopt(generation.llm, "trl")
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        generation.sync_weights = types.MethodType(_sync_weights_on_cpu, generation)


def _sync_weights_on_cpu(generation: Any) -> None:
    """TRL's ``VLLMGeneration.sync_weights`` for a colocated engine on vLLM's CPU build."""
    push_weights(generation.llm, generation._iter_named_params())
