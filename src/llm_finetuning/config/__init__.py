"""Typed pipeline configuration: dataclasses loaded from YAML and validated before any work starts.

Every field has a default and a help text (``field(metadata={"help": ...})``, read by
``run_training.py --help-config``); names follow TRL/transformers where the concept is the same
(``max_steps``, ``learning_rate``, ``num_generations``...), so a user can read TRL's docs for meaning.
Loading (``llm_finetuning/schema.py``, shared with the rewards' parameters) rejects unknown keys, suggesting
the closest valid one, and wrong types; the cross-field rules live in each class's ``__post_init__``. The
package is the ground floor: it imports nothing above it, so the names a config refers to (rewards, trackers,
reasoning-gym tasks) and its GRPO batch across a launch's processes are checked by their owners' rules in
``session/checks.py`` (``check_config``), which the pipeline and every command call before any model loads.

    model.py     ModelConfig, LoraSettings, TinyModelSettings
    data.py      DataConfig, DatasetSpec, SyntheticDataConfig, ReasoningGymConfig, PromptConfig
    training.py  SFTTrainingConfig, ExpertIterationConfig, GRPOTrainingConfig, VLLMSamplingConfig
    pipeline.py  PipelineConfig (every section), RewardConfig, RewardSpec, EvaluationConfig
    explain.py   every field with its type, value and help
    batch_rules.py  GRPO's generation-batch arithmetic (TRL's rules)
    resources.py    files the package ships: the example configs (by name: --config tiny) and the chat template

    >>> cfg = PipelineConfig.from_yaml("configs/tiny.yaml")          # doctest: +SKIP
    >>> cfg = cfg.with_overrides(["grpo_training.max_steps=10"])     # doctest: +SKIP
"""

from ..schema import ConfigError
from .data import DataConfig, DatasetSpec, PromptConfig, ReasoningGymConfig, SyntheticDataConfig
from .model import LoraSettings, ModelConfig, TinyModelSettings
from .pipeline import EvaluationConfig, PipelineConfig, RewardConfig, RewardSpec
from .training import ExpertIterationConfig, GRPOTrainingConfig, SFTTrainingConfig, VLLMSamplingConfig

__all__ = [
    "ConfigError",
    "DataConfig",
    "DatasetSpec",
    "EvaluationConfig",
    "ExpertIterationConfig",
    "GRPOTrainingConfig",
    "LoraSettings",
    "ModelConfig",
    "PipelineConfig",
    "PromptConfig",
    "ReasoningGymConfig",
    "RewardConfig",
    "RewardSpec",
    "SFTTrainingConfig",
    "SyntheticDataConfig",
    "TinyModelSettings",
    "VLLMSamplingConfig",
]
