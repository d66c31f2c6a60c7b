"""The data layer: load datasets (Hub, local files, or generated problems) and shape them for SFT and GRPO.

loader.py     DatasetLoader(spec, seed, synthetic, reasoning_gym).load() -> datasets.Dataset;
              DatasetLoader.for_data(spec, config.data)
formats.py    one adapter per schema (openmathreasoning, dapo, gsm8k, math, numina, columns, synthetic,
              reasoning_gym)
processor.py  DatasetProcessor(config, tokenizer).sft_dataset(raw, spec) / .grpo_dataset(raw, spec) -> GRPOData;
              load_sft_data(config, tokenizer) / load_grpo_data(config, tokenizer): the config's datasets
lengths.py    token lengths and the percentile rule for GRPO prompt/completion budgets
synthetic.py  the offline arithmetic problem generator and the tiny tokenizer's corpus
gym_source.py problems from a reasoning-gym task (reasoning_gym:<task>), held out by seed, template and question
workings.py   worked solutions: GSM8K-style ones read into our format, ones the project writes for arithmetic
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
