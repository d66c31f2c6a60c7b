"""The vLLM generation engines: ``vllm`` (an engine of the run, fed the training model's weights) and ``unsloth``
(the engine Unsloth built with the model, through ``model.fast_generate`` and ``model.load_lora``).

Both render prompts with our tokenizer's chat template, send token ids, stop at our tokenizer's EOS token and
nowhere else (``ignore_eos`` plus ``stop_token_ids``, as ``model.generate`` with ``eos_token_id`` does), and
decode with our tokenizer, so a completion means the same as on the hf engine. Samples are separate unseeded
requests drawn from torch's generator seeded with ``seed`` (``settings.seeded_draws``, as the hf engine draws):
vLLM samples a request with a seed of its own from a generator of its own, one request at a time, which made
sampled evaluation 1.2-1.4x slower on its CPU build (docs/benchmarks.md).

The engines themselves (start, weights, sleep, teardown) are the ``rollout.EngineOwner``'s: ``vllm`` asks
it for a ready engine before each generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .admission import admitted_within_cache
from .hf import render_prompts
from .settings import Completion, Conversation, Progress, SamplingSettings, seeded_draws

__all__ = ["UnslothEngine", "VLLMEngine", "sampling_arguments"]


def sampling_arguments(sampling: SamplingSettings, eos_token_id: int) -> dict[str, Any]:
    """``vllm.SamplingParams`` keywords for one request (one completion) with the meaning of ``sampling``."""
    common = {"n": 1, "max_tokens": sampling.max_new_tokens, "ignore_eos": True, "stop_token_ids": [eos_token_id],
              "detokenize": False}  # fmt: skip
    if sampling.greedy:
        return {**common, "temperature": 0.0}
    return {**common, "temperature": sampling.temperature, "top_p": sampling.top_p,
            "top_k": max(0, sampling.top_k), "min_p": sampling.min_p}  # fmt: skip


class VLLMEngine:
    """Generation on the owner's vLLM engine (ours, or TRL's during and after GRPO) with the model's weights."""

    name = "vllm"

    def __init__(self, manager: Any, engines: Any) -> None:
        self.manager, self.engines = manager, engines  # ModelManager, rollout.EngineOwner

    def generate(
        self, prompts: Sequence[Conversation | str], sampling: SamplingSettings, *, batch_size: int = 32,
        progress: Progress | None = None,
    ) -> list[list[Completion]]:
        """``sampling.per_prompt`` completions per prompt; vLLM schedules its own batches (``batch_size`` unused)."""
        from vllm import SamplingParams

        tokenizer = self.manager.tokenizer
        ids = tokenizer(render_prompts(tokenizer, prompts), add_special_tokens=False)["input_ids"]
        per_prompt = sampling.per_prompt
        requests = [{"prompt_token_ids": prompt_ids} for prompt_ids in ids for _ in range(per_prompt)]
        params = SamplingParams(**sampling_arguments(sampling, tokenizer.eos_token_id))  # one for every request
        with seeded_draws(sampling):
            outputs = self._run(requests, params)
        if progress is not None:
            progress(len(outputs))  # vLLM schedules every request at once: one report at the end
        completions = [_completion(output.outputs[0], tokenizer) for output in outputs]
        return [completions[i : i + per_prompt] for i in range(0, len(completions), per_prompt)]

    def _run(self, requests: list[dict], params: Any) -> list[Any]:
        prompts = [request["prompt_token_ids"] for request in requests]
        with (
            self.engines.ready(self.manager.model, str(self.manager.base_path)) as llm,
            admitted_within_cache(llm, prompts, params.max_tokens),  # no request preempted mid-way
        ):
            return llm.generate(requests, params, use_tqdm=False)


class UnslothEngine(VLLMEngine):
    """Generation on the engine Unsloth built with the model (``fast_inference``): ``model.fast_generate`` with
    the live LoRA weights from ``model.load_lora``. The engine shares the training weights, so nothing is
    pushed, and no second engine is started on the GPU."""

    name = "unsloth"

    def _run(self, requests: list[dict], params: Any) -> list[Any]:
        model = self.manager.model
        lora = None
        if hasattr(model, "load_lora") and hasattr(model, "peft_config"):
            lora_dir = Path(self.manager.config.output_dir) / "vllm_lora"  # Unsloth writes adapter_config.json there
            lora = model.load_lora(str(lora_dir), load_tensors=True)
        return model.fast_generate(requests, sampling_params=params, lora_request=lora, use_tqdm=False)


def _completion(output: Any, tokenizer: Any) -> Completion:
    token_ids = list(output.token_ids)
    ignored = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return Completion(
        tokenizer.decode(token_ids, skip_special_tokens=True),
        sum(token not in ignored for token in token_ids),
        output.finish_reason == "stop",
    )
