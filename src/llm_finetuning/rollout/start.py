"""Starting and stopping a ``vllm.LLM`` in this process, for the run's own engine and around TRL's.

An engine runs in this process (``distributed_executor_backend="external_launcher"``, as TRL's colocated engine
does), so weights can be pushed from memory. Starting one reseeds Python's, NumPy's and torch's random state
and replaces ``torch.set_num_threads``; ``preserved_process_state`` puts both back, so an engine never changes
training. vLLM reads the launcher's variables (``single_process_launch`` sets them for one process and
restores them), and its CPU build gets a KV cache of the size ``hardware.vllm_kv_cache_arguments`` gives.

``shut_down`` releases an engine whoever else still holds the ``LLM`` object: vLLM's engine core owns the
executor, the model and the KV cache, and its startup freezes them out of the garbage collector, so deleting
attributes (what unsloth_zoo's ``delete_vllm`` does) frees nothing while a trainer or a model still refers to
the engine (measured on vLLM's CPU build: 2.2 GB of RSS stayed; shut down this way, 1.1 GB went back). vLLM's teardown also destroys torch's default process group, whoever made it: an engine belongs
to one process, so a multi-process launch never starts one of ours.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..config import PipelineConfig
from ..errors import ModelError
from ..model.hardware import (
    cuda_devices,
    free_memory,
    vllm_device_arguments,
    vllm_kv_cache_arguments,
)
from ..runtime.logging_setup import console_stream, libraries_verbose, log_file, set_console_stream
from .min_p_draws import use_min_p_draws
from .weights import forget_reload_state

__all__ = ["engine_arguments", "native_output_to_log", "preserved_process_state", "shut_down",
           "single_process_launch", "start_engine", "stdout_with_a_descriptor"]  # fmt: skip

logger = logging.getLogger(__name__)

_LAUNCH_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def engine_arguments(config: PipelineConfig, model_path: str, dtype: str) -> dict[str, Any]:
    """``vllm.LLM`` keywords for the run's engine: the training weights' ``dtype`` (the run's precision), the
    model's length, the memory share of an engine that holds a second copy of the weights."""
    length = config.model.max_seq_length
    return {
        "model": model_path,
        "dtype": dtype,
        "max_model_len": length,
        "gpu_memory_utilization": config.grpo_training.engine_memory_share(holds_training_weights=False),
        "distributed_executor_backend": "external_launcher",  # in this process: weights are pushed in memory
        "seed": config.seed,
        "max_num_batched_tokens": 4096,  # TRL's choice: vLLM's profiler misjudges memory at its default
        **vllm_device_arguments(config.grpo_training.vllm_enable_sleep_mode),  # eager, prefill, sleep, KV blocks
        "use_tqdm_on_load": libraries_verbose(),  # its weight-loading bar is for --verbose
        **vllm_kv_cache_arguments(model_path, length, dtype),
    }


def start_engine(config: PipelineConfig, model_path: str, cuda: bool, dtype: str) -> Any:
    """A ``vllm.LLM`` on ``model_path`` in this process, computing in ``dtype``, on the GPU with ``cuda`` (the
    caller pushes the weights it should use)."""
    from vllm import LLM

    if not cuda:
        check_cpu_head_size(model_path)
    started = time.perf_counter()
    with single_process_launch(), preserved_process_state(), stdout_with_a_descriptor(), native_output_to_log():
        llm = LLM(**engine_arguments(config, model_path, dtype))
    use_min_p_draws(llm)  # evaluation's min_p samples drawn among the kept tokens (vLLM's CPU build only)
    logger.info("vLLM engine on %s started in %.1fs", model_path, time.perf_counter() - started)
    return llm


def shut_down(llm: Any) -> None:
    """Release the engine's model, KV cache and process groups, even while something still holds ``llm``.

    The engine core's ``shutdown`` (once; later calls do nothing) shuts the executor and its worker down, lets
    the garbage collector see what the engine's startup froze, and destroys vLLM's process groups. Before it,
    vLLM's per-layer reload state is dropped (``weights.forget_reload_state``), which would keep a layer alive.
    """
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    try:
        if core is not None:
            llm.apply_model(forget_reload_state)
    finally:  # the core goes even when dropping the reload state failed
        if core is not None:
            core.shutdown()
        free_memory()


def check_cpu_head_size(model_path: str) -> None:
    """vLLM's CPU attention takes a few head sizes only; say so before the engine starts, not mid-generation."""
    from transformers import AutoConfig
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    model_config = AutoConfig.from_pretrained(model_path)
    head_size = getattr(model_config, "head_dim", None) or model_config.hidden_size // model_config.num_attention_heads
    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head_size not in supported:
        raise ModelError(
            f"engine vllm: vLLM's CPU build attends with head sizes {supported}, and this model's is {head_size}; "
            "use engine hf (or a model whose hidden_size / num_attention_heads is one of them)"
        )


@contextmanager
def single_process_launch() -> Iterator[None]:
    """The launcher variables vLLM's in-process engine reads, for one process when no launcher set them.

    Restored afterwards: a LOCAL_RANK left behind would make the next trainer's accelerate state distributed.
    """
    saved = {name: os.environ.get(name) for name in _LAUNCH_ENV}
    defaults = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def native_output_to_log() -> Iterator[None]:
    """What vLLM's C++ side writes to stderr while an engine starts (thread and NUMA binding notices) goes to
    training.log, not the console (``--verbose``: the console); Python's own lines go on as they do."""
    log = log_file()
    if libraries_verbose() or log is None:
        yield
        return
    sys.stderr.flush()
    saved, target = os.dup(2), os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    console = console_stream()
    private = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8")  # our lines keep the terminal
    set_console_stream(private)
    os.dup2(target, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        set_console_stream(console)
        for fd in (saved, target):
            os.close(fd)
        private.close()


@contextmanager
def stdout_with_a_descriptor() -> Iterator[None]:
    """``sys.stdout`` as the process's own while an engine starts: vLLM 0.31 silences the C libraries by duplicating
    ``sys.stdout.fileno()``, which a notebook's or a test's captured stdout does not have (the engine's start then
    fails with ``UnsupportedOperation: fileno``; 0.32 takes file descriptor 1 instead)."""
    try:
        sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both an OSError and a ValueError
        captured, sys.stdout = sys.stdout, sys.__stdout__
        try:
            yield
        finally:
            sys.stdout = captured
        return
    yield


@contextmanager
def preserved_process_state() -> Iterator[None]:
    """vLLM's worker reseeds every random generator and replaces ``torch.set_num_threads``: undo both."""
    set_num_threads, python_state = torch.set_num_threads, random.getstate()
    numpy_state = _numpy_state()
    devices = cuda_devices()
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        torch.set_num_threads = set_num_threads
        random.setstate(python_state)
        if numpy_state is not None:
            import numpy

            numpy.random.set_state(numpy_state)


def _numpy_state() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy.random.get_state()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
