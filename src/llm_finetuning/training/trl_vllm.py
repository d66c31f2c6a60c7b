"""TRL's colocated vLLM engine on the hf backend: started by TRL, then owned by the run, and synced on a CPU.

``use_vllm: true`` with ``vllm_mode: colocate`` makes TRL's GRPOTrainer start a vLLM engine in this process
and push the training weights into it before each generation. Around that, and nowhere inside TRL on a GPU:

- ``trl_engine_start``: an evaluation engine of the run makes way first (never two engines on one device),
  the launcher variables TRL sets for vLLM are restored afterwards (a LOCAL_RANK left behind would make the
  next trainer's accelerate state distributed), and vLLM's CPU build gets a KV cache sized for its tiny job;
- ``adopt``: in a single-process run the run's ``ModelManager`` takes the engine, so evaluation during and
  after GRPO generates on it and ``ModelManager.free`` tears it down (in a multi-process launch TRL keeps it:
  vLLM's teardown would take the launch's process group with it);
- on vLLM's CPU build only, ``sync_weights`` of that one trainer is replaced: TRL pushes each weight through
  ``load_weights``, which fails there (``'Parameter' object has no attribute 'weight_loader'``: the CPU
  backend repacks linear weights after loading). The replacement keeps TRL's own walk over the weights (PEFT
  merge, names) and loads them the way ``generation.vllm_weights.push_weights`` does on a CPU.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..generation.vllm_engine import CPU_KV_CACHE_GIB, RunningEngine, single_process_launch
from ..generation.vllm_weights import push_weights
from ..model.hardware import on_cuda

__all__ = ["adopt", "trl_engine_start"]


@contextmanager
def trl_engine_start(manager: Any) -> Iterator[bool]:
    """Wrap the construction of a GRPOTrainer that starts TRL's colocated engine; yields whether a torch
    process group existed before it (a multi-process launch's)."""
    manager.close_vllm()
    process_group_existed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if not on_cuda():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
    set_num_threads = torch.set_num_threads  # vLLM's CPU worker replaces it in the process it runs in
    try:
        with single_process_launch():
            yield process_group_existed
    finally:
        torch.set_num_threads = set_num_threads


def adopt(trainer: Any, manager: Any, process_group_existed: bool) -> None:
    """Hand TRL's engine to ``manager`` (one process only); on vLLM's CPU build give the trainer a weight sync
    that works there."""
    generation = trainer.vllm_generation
    if not process_group_existed:
        manager.adopt_vllm(RunningEngine(generation.llm))
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        generation.sync_weights = types.MethodType(_sync_weights_on_cpu, generation)


def _sync_weights_on_cpu(generation: Any) -> None:
    """TRL's ``VLLMGeneration.sync_weights`` for a colocated engine on vLLM's CPU build."""
    push_weights(generation.llm, generation._iter_named_params())
