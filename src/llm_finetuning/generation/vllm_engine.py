"""The vLLM engines: ``vllm`` (an engine of ours on the base model, fed the training model's weights) and
``unsloth`` (the engine Unsloth built at load time, through ``model.fast_generate`` and ``model.load_lora``).

Both render prompts with our tokenizer's chat template, send token ids, stop at our tokenizer's EOS token and
nowhere else (``ignore_eos`` plus ``stop_token_ids``, as ``model.generate`` with ``eos_token_id`` does), and
decode with our tokenizer, so a completion means the same as on the hf engine. Samples are separate requests
with seeds ``seed + i`` when a seed is set: one seeded request with ``n > 1`` would repeat one sample n times.

Our engine runs in this process (``distributed_executor_backend="external_launcher"``, as TRL's colocated
engine does), so the weights are pushed from memory (``vllm_weights``), and it is built on first use: a run
that never generates with it never pays its start (on a 2-core CPU about 20 s for the first engine of a process,
vLLM's import included, 2–5 s for later ones).
Building one reseeds Python's, NumPy's and torch's random state and disables ``torch.set_num_threads``; both
are put back, so building an engine does not change training. ``shutdown`` tears it down as Unsloth's
``delete_vllm`` does. vLLM's in-process teardown destroys torch's default process group, whoever made it,
so the engine is one process's: a multi-process launch never builds one (``engines.choose_engine``).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..config import PipelineConfig
from ..errors import ModelError
from ..model.hardware import free_memory, on_cuda, resolve_dtype
from .hf import render_prompts
from .settings import Completion, Conversation, SamplingSettings
from .vllm_weights import model_weights, push_weights, weights_version

__all__ = ["RunningEngine", "UnslothEngine", "VLLMEngine", "build_engine", "engine_arguments", "sampling_arguments"]

logger = logging.getLogger(__name__)

CPU_KV_CACHE_GIB = "1"  # vLLM's CPU build sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (GiB); unset = a share of RAM
_LAUNCH_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass
class RunningEngine:
    """A ``vllm.LLM`` running in this process, and its teardown."""

    llm: Any

    def shutdown(self) -> None:
        """Free the engine's model, KV cache and process groups, as unsloth_zoo's ``delete_vllm`` does."""
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
        engine = getattr(self.llm, "llm_engine", None)
        if engine is not None and hasattr(engine, "model_executor"):
            del engine.model_executor
        self.llm = None
        free_memory()


def engine_arguments(config: PipelineConfig, model_path: str) -> dict[str, Any]:
    """``vllm.LLM`` keywords for the run's engine: the model's dtype and length, the hf backend's memory share."""
    dtype = str(resolve_dtype(config.model)).removeprefix("torch.")
    return {
        "model": model_path,
        "dtype": dtype,
        "max_model_len": config.model.max_seq_length,
        "gpu_memory_utilization": config.grpo_training.vllm_gpu_memory_utilization,
        "enable_sleep_mode": config.grpo_training.vllm_enable_sleep_mode and on_cuda(),
        "distributed_executor_backend": "external_launcher",  # in this process: weights are pushed in memory
        "seed": config.seed,
        "max_num_batched_tokens": 4096,  # TRL's choice: vLLM's profiler misjudges memory at its default
        "enforce_eager": not on_cuda(),  # compiling on a CPU takes longer than the generation it speeds up
        # vLLM's CPU build cannot rewind a seeded request's generator after a partial (chunked) prefill
        # ("CPU Generator does not use offset"): prompts are prefilled whole there
        "enable_chunked_prefill": on_cuda(),
    }


def build_engine(config: PipelineConfig, model_path: str) -> RunningEngine:
    """Start a vLLM engine on ``model_path`` in this process (the caller pushes the weights it should use)."""
    from vllm import LLM

    if not on_cuda():
        _check_cpu_head_size(model_path)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
    started = time.perf_counter()
    with single_process_launch(), _preserved_process_state():
        llm = LLM(**engine_arguments(config, model_path))
    logger.info("vLLM engine on %s started in %.1fs", model_path, time.perf_counter() - started)
    return RunningEngine(llm)


def _check_cpu_head_size(model_path: str) -> None:
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
def _preserved_process_state() -> Iterator[None]:
    """vLLM's worker reseeds every random generator and replaces ``torch.set_num_threads``: undo both."""
    set_num_threads, python_state = torch.set_num_threads, random.getstate()
    numpy_state = _numpy_state()
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
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


def sampling_arguments(sampling: SamplingSettings, eos_token_id: int, seed: int | None = None) -> dict[str, Any]:
    """``vllm.SamplingParams`` keywords for one request (one completion) with the meaning of ``sampling``."""
    common = {"n": 1, "max_tokens": sampling.max_new_tokens, "ignore_eos": True, "stop_token_ids": [eos_token_id],
              "detokenize": False}  # fmt: skip
    if sampling.greedy:
        return {**common, "temperature": 0.0}
    return {**common, "temperature": sampling.temperature, "top_p": sampling.top_p,
            "top_k": max(0, sampling.top_k), "min_p": sampling.min_p, "seed": seed}  # fmt: skip


class VLLMEngine:
    """Generation on the run's own vLLM engine, which gets the training model's current weights first."""

    name = "vllm"

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._pushed: tuple | None = None  # (engine, weights version) last pushed

    def generate(
        self, prompts: Sequence[Conversation | str], sampling: SamplingSettings, *, batch_size: int = 32,
        progress: bool = False, description: str = "generating",
    ) -> list[list[Completion]]:
        """``sampling.per_prompt`` completions per prompt; vLLM schedules its own batches (``batch_size`` unused)."""
        from vllm import SamplingParams

        tokenizer = self.manager.tokenizer
        ids = tokenizer(render_prompts(tokenizer, prompts), add_special_tokens=False)["input_ids"]
        per_prompt = sampling.per_prompt
        requests, params = [], []
        for index, prompt_ids in enumerate(ids):
            for sample in range(per_prompt):
                seed = None if sampling.seed is None else sampling.seed + index * per_prompt + sample
                requests.append({"prompt_token_ids": prompt_ids})
                params.append(SamplingParams(**sampling_arguments(sampling, tokenizer.eos_token_id, seed)))
        outputs = self._run(requests, params, progress)
        completions = [_completion(output.outputs[0], tokenizer) for output in outputs]
        return [completions[i : i + per_prompt] for i in range(0, len(completions), per_prompt)]

    def _run(self, requests: list[dict], params: list[Any], progress: bool) -> list[Any]:
        llm, model = self.manager.vllm_engine().llm, self.manager.model
        asleep = llm.llm_engine.is_sleeping()  # TRL's engine with vllm_enable_sleep_mode, between its rollouts
        if asleep:
            llm.wake_up()
        pushed = (id(llm), weights_version(model))
        if asleep or pushed != self._pushed:
            push_weights(llm, model_weights(model))
            self._pushed = pushed
        try:
            return llm.generate(requests, params, use_tqdm=progress)
        finally:
            if asleep:  # as TRL left it: its next rollout wakes it and pushes the weights again
                llm.sleep(level=2)
                self._pushed = None


class UnslothEngine(VLLMEngine):
    """Generation on the engine Unsloth built with the model (``fast_inference``): ``model.fast_generate`` with
    the live LoRA weights from ``model.load_lora``. The engine shares the training weights, so nothing is
    pushed, and no second engine is started on the GPU."""

    name = "unsloth"

    def _run(self, requests: list[dict], params: list[Any], progress: bool) -> list[Any]:
        model = self.manager.model
        lora = None
        if hasattr(model, "load_lora") and hasattr(model, "peft_config"):
            lora_dir = Path(self.manager.config.output_dir) / "vllm_lora"  # Unsloth writes adapter_config.json there
            lora = model.load_lora(str(lora_dir), load_tensors=True)
        return model.fast_generate(requests, sampling_params=params, lora_request=lora, use_tqdm=progress)


def _completion(output: Any, tokenizer: Any) -> Completion:
    token_ids = list(output.token_ids)
    ignored = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return Completion(
        tokenizer.decode(token_ids, skip_special_tokens=True),
        sum(token not in ignored for token in token_ids),
        output.finish_reason == "stop",
    )
