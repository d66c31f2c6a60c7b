"""The data layer: load datasets (Hub, local files, or the offline generator) and shape them for SFT and GRPO.

loader.py     DatasetLoader(spec, seed, synthetic).load() -> datasets.Dataset
formats.py    one adapter per schema (openmathreasoning, dapo, gsm8k, math, numina, columns, synthetic)
processor.py  DatasetProcessor(config, tokenizer).sft_dataset(raw, spec) / .grpo_dataset(raw, spec) -> GRPOData;
              load_sft_data(config, tokenizer) / load_grpo_data(config, tokenizer): the config's datasets
lengths.py    token lengths and the percentile rule for GRPO prompt/completion budgets
synthetic.py  the offline arithmetic problem generator and the tiny tokenizer's corpus
"""

from .formats import ADAPTERS, detect_format, last_boxed
from .loader import DatasetLoader
from .processor import DatasetProcessor, GRPOData, load_grpo_data, load_sft_data
from .synthetic import generate_arithmetic, tokenizer_corpus

__all__ = [
    "ADAPTERS",
    "DatasetLoader",
    "DatasetProcessor",
    "GRPOData",
    "detect_format",
    "generate_arithmetic",
    "last_boxed",
    "load_grpo_data",
    "load_sft_data",
    "tokenizer_corpus",
]
