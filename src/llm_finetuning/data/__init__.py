"""The data layer: load datasets (Hub, local files, or the offline generator) and shape them for SFT and GRPO.

loader.py     DatasetLoader(spec, seed, synthetic).load() -> datasets.Dataset
formats.py    one adapter per schema (openmathreasoning, dapo, gsm8k, math, numina, columns, synthetic)
processor.py  DatasetProcessor(config, tokenizer).sft_dataset(raw, spec) / .grpo_dataset(raw, spec) -> GRPOData
lengths.py    token lengths and the percentile rule for GRPO prompt/completion budgets
synthetic.py  the offline arithmetic problem generator and the tiny tokenizer's corpus
"""

from .formats import ADAPTERS, detect_format, last_boxed
from .loader import DatasetLoader
from .processor import DatasetProcessor, GRPOData
from .synthetic import generate_arithmetic, tokenizer_corpus

__all__ = [
    "ADAPTERS",
    "DatasetLoader",
    "DatasetProcessor",
    "GRPOData",
    "detect_format",
    "generate_arithmetic",
    "last_boxed",
    "tokenizer_corpus",
]
