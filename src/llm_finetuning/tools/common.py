"""What the tools' command lines share: config flags, model loading, sampling settings and error reporting.

Every tool takes ``--config`` and ``--set SECTION.FIELD=VALUE`` like ``run_training.py``, loads the trained
model through ``ModelManager`` and generates through ``evaluation.generation``, so a tool sees the model
exactly as training and evaluation do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cli import add_config_arguments, run_reporting_errors
from ..config import PipelineConfig
from ..errors import ModelError

__all__ = [
    "add_config_arguments",
    "default_adapter",
    "generation_budget",
    "grpo_sampling",
    "load_model",
    "resolve_config",
    "reward_scores",
    "run_reporting_errors",
    "weighted_total",
]


def resolve_config(args: argparse.Namespace) -> PipelineConfig:
    return PipelineConfig.from_yaml(args.config, list(args.overrides))


def default_adapter(config: PipelineConfig, prefer_grpo: bool = True) -> Path:
    """The run's newest trained weights: the GRPO adapter (``save_path``) if it exists, else ``sft/final``."""
    output_dir = Path(config.output_dir)
    sft_final, grpo = config.sft_adapter_path, config.grpo_adapter_path
    if prefer_grpo and grpo.is_dir():
        return grpo
    if sft_final.is_dir():
        return sft_final
    raise ModelError(
        f"no trained weights under {output_dir} (looked for {grpo} and {sft_final}); "
        "train first or pass --adapter PATH"
    )


def load_model(config: PipelineConfig, adapter: str | Path | None) -> Any:
    """A ``ModelManager`` in eval mode: base + ``adapter`` (a LoRA or full save), or the base model alone."""
    from ..data.synthetic import tokenizer_corpus_for
    from ..model import ModelManager

    corpus = tokenizer_corpus_for(config)
    if adapter is not None:
        return ModelManager.load_for_inference(config, adapter, tokenizer_corpus=corpus)
    manager = ModelManager(config, tokenizer_corpus=corpus)
    manager.load()  # a fresh LoRA adapter is a no-op, so this is the base model's behaviour
    manager.model.eval()
    return manager


def generation_budget(config: PipelineConfig, computed: int | None = None) -> int:
    """New tokens per completion: evaluation.max_new_tokens, else GRPO's budget (configured or computed)."""
    budget = config.evaluation.max_new_tokens or config.grpo_training.max_completion_length or computed
    return budget or config.model.max_seq_length // 2


def grpo_sampling(config: PipelineConfig, num_samples: int, max_new_tokens: int) -> Any:
    """Sampling as GRPO does it: the config's ``vllm_sampling`` settings, ``num_samples`` per prompt."""
    from ..evaluation.generation import SamplingSettings

    sampling = config.vllm_sampling
    return SamplingSettings(
        greedy=False,
        num_samples=num_samples,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        min_p=sampling.min_p,
        max_new_tokens=max_new_tokens,
    )


def conversation(config: PipelineConfig, question: str) -> list[dict[str, str]]:
    """A question as the data layer phrases it: the config's system prompt, then the user turn."""
    from ..data.processor import conversation as data_conversation

    return data_conversation(config.prompt.system_prompt, question)


def reward_scores(
    funcs: Sequence[Any], prompts: Sequence[Any], completions: Sequence[str], golds: Sequence[str]
) -> dict[str, list[float]]:
    """Each reward's score per completion, called as TRL calls it (one prompt and gold per completion).

    A ``None`` score (the reward does not apply) counts as 0, as in ``CompletionJudge.total_rewards``.
    """
    kwargs = {"prompts": list(prompts), "completions": list(completions), "answer": list(golds)}
    return {func.__name__: [0.0 if s is None else float(s) for s in func(**kwargs)] for func in funcs}


def weighted_total(scores: dict[str, list[float]], weights: Sequence[float]) -> list[float]:
    """The summed reward GRPO optimises: each reward's score times its weight, per completion."""
    columns = [[w * s for s in column] for w, column in zip(weights, scores.values(), strict=True)]
    return [round(sum(values), 6) for values in zip(*columns, strict=True)]


def parse_with(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    return parser.parse_args(list(sys.argv[1:] if argv is None else argv))
