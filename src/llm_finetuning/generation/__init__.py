"""Generation for evaluation, debugging and inference: one set of sampling settings, one generation function.

settings.py  SamplingSettings (from_config), generation_budget, Completion
hf.py        the hf engine: batched ``model.generate`` on the loaded model

    >>> from llm_finetuning.generation import SamplingSettings, generate_completions   # doctest: +SKIP
    >>> generate_completions(model, tokenizer, [conversation], SamplingSettings(greedy=True))  # doctest: +SKIP
"""

from .hf import generate_completions, generate_detailed, render_prompts
from .settings import Completion, Conversation, SamplingSettings, generation_budget

__all__ = [
    "Completion",
    "Conversation",
    "SamplingSettings",
    "generate_completions",
    "generate_detailed",
    "generation_budget",
    "render_prompts",
]
