"""Generation for evaluation, debugging and inference: one set of sampling settings, three engines.

settings.py      SamplingSettings (from_config), generation_budget, Completion
engines.py       the engine registry (hf, vllm, unsloth) and choose_engine, the rule behind evaluation.engine
hf.py            the hf engine: batched ``model.generate`` on the loaded model
vllm_engine.py   the vllm engine (ours, fed the training weights) and the unsloth engine (``model.fast_generate``)
vllm_weights.py  the training model's weights into a running vLLM engine (GPU, and vLLM's CPU build)

A ``ModelManager`` holds the engine it generates with (``manager.use_engine``):

    >>> engine = manager.use_engine("auto")                                                  # doctest: +SKIP
    >>> engine.generate([conversation], SamplingSettings(greedy=True, max_new_tokens=32))     # doctest: +SKIP
    >>> generate_completions(model, tokenizer, [conversation], SamplingSettings(greedy=True))  # doctest: +SKIP
"""

from .engines import ENGINES, GenerationEngine, choose_engine, get_engine
from .hf import generate_completions, generate_detailed, render_prompts
from .settings import Completion, Conversation, SamplingSettings, generation_budget

__all__ = [
    "ENGINES",
    "Completion",
    "Conversation",
    "GenerationEngine",
    "SamplingSettings",
    "choose_engine",
    "generate_completions",
    "generate_detailed",
    "generation_budget",
    "get_engine",
    "render_prompts",
]
