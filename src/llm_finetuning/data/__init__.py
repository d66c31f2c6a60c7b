"""The data layer: load datasets (Hub, local files, or generated problems) and shape them for SFT and GRPO.

loader.py     DatasetLoader(spec, seed, synthetic, reasoning_gym).load() -> datasets.Dataset;
              DatasetLoader.for_data(spec, config)
formats.py    one adapter per schema (openmathreasoning, dapo, gsm8k, math, numina, columns, synthetic,
              reasoning_gym)
processor.py  DatasetProcessor(config, tokenizer).sft_dataset(raw, spec) / .grpo_dataset(raw, spec) -> GRPOData;
              load_sft_data(config, tokenizer) / load_grpo_data(config, tokenizer): the config's datasets
lengths.py    token lengths and the percentile rule for GRPO prompt/completion budgets
synthetic.py  the offline arithmetic problem generator and the tiny tokenizer's corpus

A reasoning-gym task's problems and worked solutions are the task's own (``tasks/gym_rows.py``,
``tasks/workings.py``); the loader asks for them by name.
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
