"""What every generation engine agrees on: the sampling settings, the generation budget, and a completion.

``SamplingSettings.from_config`` is the one place that turns the config's sampling (GRPO's ``temperature``, ``top_p``, ``top_k``, ``min_p``) into
settings (GRPO, sampled evaluation, ``debug_grpo.py`` and ``evaluate --k`` all sample alike), and
``generation_budget`` the one place that decides how many new tokens a completion may have.

    >>> from llm_finetuning.config import PipelineConfig
    >>> config = PipelineConfig.from_dict({"grpo_training": {"temperature": 0.8}})
    >>> SamplingSettings.from_config(config, num_samples=4, max_new_tokens=64).temperature
    0.8
    >>> generation_budget(config.with_overrides(["evaluation.max_new_tokens=32"]))
    32
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..config import PipelineConfig

Conversation = list[dict[str, str]]
Progress = Callable[[int], None]  # told how many more completions are done (a progress view's ``advance``)


@dataclass(frozen=True)
class Completion:
    """One generated completion: its text, its length in tokens, and whether it stopped at EOS (not the limit)."""

    text: str
    num_tokens: int
    finished: bool


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: greedy, or ``num_samples`` completions per prompt at ``temperature``.

    Every engine reads these the same way: completions stop at the tokenizer's EOS token (and only there) or
    after ``max_new_tokens``; top-k, top-p and min-p cut the temperature-scaled distribution. ``seed`` fixes
    the samples of one engine (``None``: the engine's running random state); the hf and vLLM engines draw
    from different random streams, so the same seed gives each its own, reproducible samples.
    """

    greedy: bool = True
    num_samples: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 = no top-k cut
    min_p: float = 0.0  # 0 = no min-p cut
    max_new_tokens: int = 256
    seed: int | None = None

    @classmethod
    def from_config(
        cls, config: PipelineConfig, *, num_samples: int, max_new_tokens: int, seed: int | None = None,
        evaluation: bool = False,
    ) -> SamplingSettings:
        """Sampling as GRPO does it: the config's ``rollout_sampling``, ``num_samples`` per prompt; with
        ``evaluation``, evaluation's own (``evaluation.sampling``) where the config gives them."""
        sampling = (config.evaluation.sampling if evaluation else None) or config.rollout_sampling
        return cls(
            greedy=False,
            num_samples=num_samples,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            min_p=sampling.min_p,
            max_new_tokens=max_new_tokens,
            seed=seed,
        )

    @property
    def per_prompt(self) -> int:
        return 1 if self.greedy else self.num_samples


def generation_budget(config: PipelineConfig, computed: int | None = None) -> int:
    """New tokens per completion: ``evaluation.max_new_tokens``, else GRPO's budget (configured, else the one
    ``computed`` from the data), else half of ``max_seq_length``."""
    budget = config.evaluation.max_new_tokens or config.grpo_training.max_completion_length or computed
    return budget or config.model.max_seq_length // 2


@contextmanager
def seeded_draws(sampling: SamplingSettings) -> Iterator[None]:
    """Draw ``sampling``'s samples from ``sampling.seed`` in a forked random state: the same seed gives the same
    samples, and the caller's (training's) stream is left where it was. Both engines sample from torch's global
    generator in this process (vLLM's in-process engine too: its sampler takes one batched draw per step), so
    this one seed is what fixes their samples."""
    if sampling.greedy or sampling.seed is None:
        yield
        return
    import torch

    from ..model.hardware import cuda_devices

    with torch.random.fork_rng(devices=cuda_devices()):
        torch.manual_seed(sampling.seed)
        yield
