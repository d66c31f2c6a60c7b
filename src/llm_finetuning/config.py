"""Typed pipeline configuration: nine dataclasses loaded from YAML and validated before any work starts.

Every field has a default and a one-line comment; names follow TRL/transformers where the concept is the
same (``max_steps``, ``learning_rate``, ``num_generations``...), so a user can read TRL's docs for meaning.
Loading goes through ``config_loading.build_dataclass``, which rejects unknown keys (suggesting the closest
valid one) and wrong types; the cross-field rules live in each class's ``__post_init__``.

    >>> cfg = PipelineConfig.from_yaml("configs/tiny.yaml")          # doctest: +SKIP
    >>> cfg = cfg.with_overrides(["grpo_training.max_steps=10"])     # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from .config_loading import ConfigError, apply_override, build_dataclass, merge_onto_defaults, to_plain

__all__ = [
    "ConfigError",
    "DataConfig",
    "DatasetSpec",
    "EvaluationConfig",
    "GRPOTrainingConfig",
    "LoraSettings",
    "ModelConfig",
    "PipelineConfig",
    "PromptConfig",
    "RewardConfig",
    "RewardSpec",
    "SFTTrainingConfig",
    "SyntheticDataConfig",
    "TinyModelSettings",
    "VLLMSamplingConfig",
]

DatasetFormat = Literal["auto", "openmathreasoning", "dapo", "gsm8k", "math", "numina", "columns", "synthetic"]
HeldoutBy = Literal["tuples", "wording"]
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"]


def _require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{key}: {message}")


@dataclass
class LoraSettings:
    """LoRA adapter settings (the seed's r=64/alpha=64 on attention and MLP projections)."""

    enabled: bool = True  # false = full fine-tuning (for the tiny model trained from scratch)
    rank: int = 64  # LoRA rank r
    alpha: int = 64  # LoRA scaling alpha (the seed uses alpha = rank)
    dropout: float = 0.0  # dropout on the LoRA input
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )  # module names that receive adapters
    modules_to_save: list[str] = field(default_factory=list)  # modules trained in full and saved with the adapter

    def __post_init__(self) -> None:
        _require(self.rank > 0, "rank", f"must be > 0 (got {self.rank})")
        _require(self.alpha > 0, "alpha", f"must be > 0 (got {self.alpha})")
        _require(0 <= self.dropout < 1, "dropout", f"must be in [0, 1) (got {self.dropout})")


@dataclass
class TinyModelSettings:
    """Shape of the offline demo model (a randomly initialised Qwen3) and its locally trained tokenizer."""

    hidden_size: int = 128  # width of the residual stream
    num_hidden_layers: int = 4  # transformer blocks
    num_attention_heads: int = 4  # query heads
    num_key_value_heads: int = 2  # key/value heads (grouped-query attention)
    intermediate_size: int = 384  # MLP width
    vocab_size: int = 320  # target size of the byte-level BPE vocabulary
    seed: int = 0  # seed for weights and tokenizer training: same seed, same model

    def __post_init__(self) -> None:
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
            _require(getattr(self, key) > 0, key, f"must be > 0 (got {getattr(self, key)})")
        _require(
            self.hidden_size % self.num_attention_heads == 0,
            "hidden_size",
            f"must be divisible by num_attention_heads = {self.num_attention_heads} (got {self.hidden_size})",
        )
        _require(
            self.num_attention_heads % self.num_key_value_heads == 0,
            "num_key_value_heads",
            f"must divide num_attention_heads = {self.num_attention_heads} (got {self.num_key_value_heads})",
        )
        _require(
            self.vocab_size >= 260,
            "vocab_size",
            f"must be >= 260: 256 byte tokens plus the special tokens (got {self.vocab_size})",
        )


@dataclass
class ModelConfig:
    """Which base model to load, through which backend, and how to adapt it."""

    model_name: str = "unsloth/Qwen3-4B-Base"  # Hub id, local path, or "builtin:tiny-qwen3" (the offline demo)
    backend: Literal["auto", "unsloth", "hf"] = "auto"  # auto = unsloth when CUDA and unsloth are present
    max_seq_length: int = 2048  # longest prompt + completion the model will see
    load_in_4bit: bool = False  # 4-bit quantised base (CUDA only)
    fast_inference: bool = True  # unsloth: start a vLLM engine for GRPO generation
    gpu_memory_utilization: float = 0.7  # share of GPU memory vLLM may take
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"  # auto = bf16 on capable CUDA, else fp32
    gradient_checkpointing: bool = True  # trade compute for memory (unsloth uses its own variant)
    random_state: int = 3407  # seed for adapter initialisation
    lora: LoraSettings | None = field(default_factory=LoraSettings)  # null = full fine-tuning
    tiny: TinyModelSettings = field(default_factory=TinyModelSettings)  # used only for builtin:tiny-qwen3

    def __post_init__(self) -> None:
        _require(self.max_seq_length > 0, "max_seq_length", f"must be > 0 (got {self.max_seq_length})")
        _require(
            0 < self.gpu_memory_utilization <= 1,
            "gpu_memory_utilization",
            f"must be in (0, 1] (got {self.gpu_memory_utilization})",
        )
        _require(
            not (self.load_in_4bit and not self.uses_lora),
            "load_in_4bit",
            "4-bit weights cannot be fully fine-tuned; set a lora section or load_in_4bit: false",
        )

    @property
    def uses_lora(self) -> bool:
        return self.lora is not None and self.lora.enabled


@dataclass
class DatasetSpec:
    """One dataset: where it lives and how to read its columns."""

    name: str = ""  # Hub id, local file/folder (.jsonl/.json/.parquet/.csv), or "synthetic:arithmetic"
    subset: str | list[str] | None = None  # Hub configuration name, or a list of them to concatenate
    split: str = "train"  # split to load
    format: DatasetFormat = "auto"  # schema adapter; auto detects from the columns
    max_samples: int | None = None  # keep at most this many rows after shuffling
    question_column: str = "question"  # format=columns: column holding the problem
    answer_column: str = "answer"  # format=columns: column holding the final answer
    solution_column: str | None = None  # format=columns: column holding a worked solution (SFT)
    keep_answer_instruction: bool = False  # format=dapo: keep DAPO's "Answer: $Answer" instruction in prompts

    def __post_init__(self) -> None:
        if self.max_samples is not None:
            _require(self.max_samples > 0, "max_samples", f"must be > 0 (got {self.max_samples})")


@dataclass
class SyntheticDataConfig:
    """The offline arithmetic word-problem generator behind ``synthetic:arithmetic``."""

    num_train: int = 4000  # training problems generated (SFT and GRPO draw from these)
    num_eval: int = 200  # held-out problems (distinct questions), disjoint from training
    min_operand: int = 0  # smallest operand
    max_operand: int = 20  # largest operand
    operations: list[str] = field(default_factory=lambda: ["+", "-"])  # drawn from "+", "-", "*"
    num_operations: int = 1  # operations per problem (1 = "a + b", 2 = "a + b - c"), worked left to right
    word_problem_fraction: float = 0.5  # share phrased as a story ("Tom has 3 apples..."), rest "What is 3 + 4?"
    allow_negative: bool = False  # false = redraw problems whose working goes below zero
    eval_fraction_of_tuples: float = 0.15  # heldout_by=tuples: share of (operands, operations) tuples held out
    heldout_by: HeldoutBy = "tuples"  # held out: "tuples" (unseen facts) or "wording" (unseen name+item stories)

    def __post_init__(self) -> None:
        _require(
            self.heldout_by in ("tuples", "wording"),
            "heldout_by",
            f'must be "tuples" or "wording" (got {self.heldout_by!r})',
        )
        _require(self.num_train > 0, "num_train", f"must be > 0 (got {self.num_train})")
        _require(self.num_eval >= 0, "num_eval", f"must be >= 0 (got {self.num_eval})")
        _require(
            self.min_operand <= self.max_operand,
            "max_operand",
            f"must be >= min_operand (got {self.min_operand}..{self.max_operand})",
        )
        unknown = sorted(set(self.operations) - {"+", "-", "*"})
        _require(bool(self.operations) and not unknown, "operations", f'use "+", "-", "*" (got {self.operations})')
        _require(self.num_operations >= 1, "num_operations", f"must be >= 1 (got {self.num_operations})")
        _require(
            0 <= self.word_problem_fraction <= 1,
            "word_problem_fraction",
            f"must be in [0, 1] (got {self.word_problem_fraction})",
        )
        _require(
            0 <= self.eval_fraction_of_tuples < 1,
            "eval_fraction_of_tuples",
            f"must be in [0, 1) (got {self.eval_fraction_of_tuples})",
        )
        _require(
            self.num_eval == 0 or self.heldout_by == "wording" or self.eval_fraction_of_tuples > 0,
            "eval_fraction_of_tuples",
            "must be > 0 when num_eval > 0 (held-out problems come from held-out tuples)",
        )


@dataclass
class DataConfig:
    """Datasets for both phases and how they are processed."""

    sft: DatasetSpec = field(
        default_factory=lambda: DatasetSpec(name="unsloth/OpenMathReasoning-mini", split="cot")
    )  # SFT (format-teaching) data
    grpo: DatasetSpec = field(
        default_factory=lambda: DatasetSpec(name="open-r1/DAPO-Math-17k-Processed", subset="en")
    )  # GRPO (reward) data
    synthetic: SyntheticDataConfig = field(default_factory=SyntheticDataConfig)  # generator settings
    prompt_length_percentile: float = 90.0  # keep GRPO prompts at or under this length percentile
    sft_max_length_fraction: float = 0.5  # drop SFT examples longer than this share of max_seq_length
    numeric_answers_only: bool = True  # SFT: keep only examples whose answer is a number (Unsloth's recipe)
    seed: int = 3407  # shuffle and split seed
    num_proc: int | None = None  # worker processes for map() on large datasets

    def __post_init__(self) -> None:
        _require(
            0 < self.prompt_length_percentile <= 100,
            "prompt_length_percentile",
            f"must be in (0, 100] (got {self.prompt_length_percentile})",
        )
        _require(
            0 < self.sft_max_length_fraction <= 1,
            "sft_max_length_fraction",
            f"must be in (0, 1] (got {self.sft_max_length_fraction})",
        )


@dataclass
class PromptConfig:
    """Tags and system prompt injected into the chat template and read by the rewards."""

    system_prompt: str = (
        "You are given a problem. Think about the problem and provide your working out. "
        "Place it between <start_working_out> and <end_working_out>. "
        "Then, provide your solution between <SOLUTION></SOLUTION>"
    )  # system message of every conversation
    reasoning_start: str = "<start_working_out>"  # opens the reasoning (prefilled by the generation prompt)
    reasoning_end: str = "<end_working_out>"  # closes the reasoning
    solution_start: str = "<SOLUTION>"  # opens the final answer
    solution_end: str = "</SOLUTION>"  # closes the final answer
    chat_template: str = "templates/chat_template.jinja"  # Jinja template, relative to the project root

    def __post_init__(self) -> None:
        tags = [self.reasoning_start, self.reasoning_end, self.solution_start, self.solution_end]
        _require(all(tags), "reasoning_start", "the four tags must be non-empty")
        _require(len(set(tags)) == 4, "solution_end", f"the four tags must differ (got {tags})")


@dataclass
class SFTTrainingConfig:
    """Phase 1: supervised fine-tuning that teaches the output format (TRL SFTConfig names)."""

    num_train_epochs: float = 2.0  # passes over the SFT data (ignored when max_steps > 0)
    max_steps: int = -1  # optimiser steps; -1 = run num_train_epochs
    per_device_train_batch_size: int = 1  # sequences per device per step
    gradient_accumulation_steps: int = 1  # micro-batches per optimiser step
    learning_rate: float = 2e-4  # peak learning rate
    warmup_steps: float = 0.05  # warmup: a float < 1 is a share of the steps, >= 1 a step count
    lr_scheduler_type: str = "linear"  # transformers scheduler name
    weight_decay: float = 0.01  # AdamW weight decay
    optim: str = "adamw_torch"  # transformers optimiser name (adamw_8bit on GPU saves memory)
    max_grad_norm: float = 1.0  # gradient clipping
    logging_steps: int = 5  # log every N steps
    save_steps: int = 50  # checkpoint every N steps
    save_total_limit: int = 2  # keep at most this many checkpoints

    def __post_init__(self) -> None:
        _check_common_training(self)


@dataclass
class GRPOTrainingConfig:
    """Phase 2: GRPO reinforcement learning against the reward functions (TRL GRPOConfig names)."""

    max_steps: int = 100  # optimiser steps
    learning_rate: float = 5e-6  # peak learning rate (GRPO needs far less than SFT)
    per_device_train_batch_size: int = 1  # completions per device per micro-batch
    gradient_accumulation_steps: int = 2  # micro-batches per optimiser step
    num_generations: int = 2  # completions sampled per prompt (the group size)
    max_prompt_length: int | None = None  # null = computed from the data (percentile rule)
    max_completion_length: int | None = None  # null = max_seq_length - max_prompt_length
    loss_type: LossType = "dapo"  # TRL loss aggregation (dr_grpo, dapo, bnpo, grpo, ...)
    importance_sampling_level: Literal["token", "sequence"] = "token"  # sequence = GSPO
    beta: float = 0.0  # KL coefficient against the reference model (0 = no reference model)
    epsilon: float = 0.2  # lower clip range
    epsilon_high: float | None = None  # upper clip range (clip-higher); null = epsilon
    scale_rewards: Literal["group", "batch", "none"] = "group"  # how advantages are normalised
    mask_truncated_completions: bool = False  # exclude completions cut at max_completion_length from the loss
    warmup_steps: float = 0.1  # warmup: a float < 1 is a share of the steps, >= 1 a step count
    lr_scheduler_type: str = "linear"  # transformers scheduler name
    weight_decay: float = 0.001  # AdamW weight decay
    optim: str = "adamw_torch"  # transformers optimiser name
    max_grad_norm: float = 1.0  # gradient clipping
    logging_steps: int = 1  # log every N steps
    save_steps: int = 50  # checkpoint every N steps
    save_total_limit: int = 2  # keep at most this many checkpoints
    eval_strategy: Literal["no", "steps"] = "steps"  # evaluate on the validation split during GRPO
    eval_steps: int = 20  # evaluate every N steps
    train_validation_split: float = 0.9  # share of GRPO data used for training (rest = validation)
    use_vllm: bool | None = None  # null = use vLLM when the backend can (unsloth fast_inference / CUDA+vllm)
    vllm_mode: Literal["colocate", "server"] = "colocate"  # vLLM in this process, or a `trl vllm-serve` server
    vllm_enable_sleep_mode: bool = False  # offload vLLM weights while training steps run (saves memory)
    save_path: str = "grpo_saved_lora"  # final adapter; relative paths resolve inside output_dir

    def __post_init__(self) -> None:
        _check_common_training(self)
        _require(
            self.num_generations >= 2,
            "num_generations",
            f"must be >= 2: GRPO compares completions within a group (got {self.num_generations})",
        )
        batch = self.per_device_train_batch_size * self.gradient_accumulation_steps
        _require(
            batch % self.num_generations == 0,
            "num_generations",
            f"the generation batch per_device_train_batch_size x gradient_accumulation_steps = {batch} "
            f"must be divisible by num_generations = {self.num_generations}",
        )
        _require(
            0 < self.train_validation_split <= 1,
            "train_validation_split",
            f"must be in (0, 1] (got {self.train_validation_split})",
        )
        _require(self.eval_steps > 0, "eval_steps", f"must be > 0 (got {self.eval_steps})")
        _require(self.beta >= 0, "beta", f"must be >= 0 (got {self.beta})")


def _check_common_training(section: Any) -> None:
    _require(section.learning_rate > 0, "learning_rate", f"must be > 0 (got {section.learning_rate})")
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps", "logging_steps", "save_steps"):
        value = getattr(section, key)
        _require(value > 0, key, f"must be > 0 (got {value})")
    _require(
        section.max_steps == -1 or section.max_steps > 0,
        "max_steps",
        f"must be -1 (use epochs) or > 0 (got {section.max_steps})",
    )


@dataclass
class VLLMSamplingConfig:
    """How GRPO samples completions (passed to vLLM or to transformers' generate)."""

    temperature: float = 1.0  # sampling temperature; too low and a group's completions coincide
    top_p: float = 1.0  # nucleus sampling
    top_k: int = -1  # -1 = no top-k cut
    min_p: float = 0.1  # drop tokens below min_p x the top token's probability

    def __post_init__(self) -> None:
        _require(self.temperature > 0, "temperature", f"must be > 0 (got {self.temperature})")
        _require(0 < self.top_p <= 1, "top_p", f"must be in (0, 1] (got {self.top_p})")
        _require(0 <= self.min_p < 1, "min_p", f"must be in [0, 1) (got {self.min_p})")


@dataclass
class RewardSpec:
    """One reward function by registered name, with its weight and parameters."""

    name: str = ""  # a name from llm_finetuning.rewards.available_rewards()
    weight: float = 1.0  # multiplier in the summed reward
    params: dict[str, Any] = field(default_factory=dict)  # keyword arguments for the reward's factory


def _seed_rewards() -> list[RewardSpec]:
    names = ["match_format_exactly", "match_format_approximately", "check_answer", "check_numbers"]
    return [RewardSpec(name=name) for name in names]


@dataclass
class RewardConfig:
    """The rewards GRPO optimises (the seed's four graded rewards by default)."""

    rewards: list[RewardSpec] = field(default_factory=_seed_rewards)  # summed with their weights

    def __post_init__(self) -> None:
        _require(bool(self.rewards), "rewards", "list at least one reward")


@dataclass
class EvaluationConfig:
    """Greedy and sampled evaluation on held-out problems before SFT, after SFT and after GRPO."""

    enabled: bool = True  # run the before/after evaluations
    num_samples: int = 200  # held-out problems scored each time (capped by the validation split)
    sampled_k: int = 4  # samples per problem for sampled_answer_accuracy (avg@k at the GRPO temperature)
    max_new_tokens: int | None = None  # null = GRPO's max_completion_length
    batch_size: int = 32  # prompts per generate() call
    eval_before_sft: bool = True  # also score the untouched base model

    def __post_init__(self) -> None:
        _require(self.num_samples > 0, "num_samples", f"must be > 0 (got {self.num_samples})")
        _require(self.sampled_k >= 1, "sampled_k", f"must be >= 1 (got {self.sampled_k})")
        _require(self.batch_size > 0, "batch_size", f"must be > 0 (got {self.batch_size})")


@dataclass
class PipelineConfig:
    """The whole run: every section above plus where outputs go."""

    output_dir: str = "outputs"  # checkpoints, logs, metrics, plots and the final adapter
    seed: int = 3407  # global seed (torch, python, data)
    report_to: Literal["none", "tensorboard", "wandb", "trackio"] = "none"  # experiment tracker
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"  # console and training.log level
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    sft_training: SFTTrainingConfig = field(default_factory=SFTTrainingConfig)
    grpo_training: GRPOTrainingConfig = field(default_factory=GRPOTrainingConfig)
    vllm_sampling: VLLMSamplingConfig = field(default_factory=VLLMSamplingConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)

    def __post_init__(self) -> None:
        grpo = self.grpo_training
        if grpo.max_prompt_length is not None and grpo.max_completion_length is not None:
            total = grpo.max_prompt_length + grpo.max_completion_length
            _require(
                total <= self.model.max_seq_length,
                "grpo_training.max_completion_length",
                f"max_prompt_length + max_completion_length = {total} exceeds model.max_seq_length = "
                f"{self.model.max_seq_length}",
            )
        _validate_reward_names(self.rewards)

    @property
    def grpo_adapter_path(self) -> Path:
        """Where GRPO's final adapter goes: ``grpo_training.save_path``, a relative one inside ``output_dir``."""
        path = Path(self.grpo_training.save_path)
        return (path if path.is_absolute() else Path(self.output_dir) / path).resolve()

    @property
    def sft_adapter_path(self) -> Path:
        """Where SFT's final adapter goes (and where ``--skip-sft`` continues from)."""
        return Path(self.output_dir) / "sft" / "final"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PipelineConfig:
        """Build from plain data; keys not given keep their defaults (sections are merged, not replaced)."""
        return build_dataclass(cls, merge_onto_defaults(to_plain(cls()), raw), path="")

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: list[str] | None = None) -> PipelineConfig:
        """Load ``path``, apply ``section.field=value`` overrides, validate; raise ConfigError on any problem."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found (see configs/ for examples)")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
        for override in overrides or []:
            apply_override(raw, override)
        return cls.from_dict(raw)

    def with_overrides(self, overrides: list[str]) -> PipelineConfig:
        raw = self.to_dict()
        for override in overrides:
            apply_override(raw, override)
        return PipelineConfig.from_dict(raw)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def replace(self, **changes: Any) -> PipelineConfig:
        return dataclasses.replace(self, **changes)


def _validate_reward_names(reward_config: RewardConfig) -> None:
    # Imported here: the reward registry pulls in the grader, which config loading should not need otherwise.
    try:
        from .rewards import validate_reward_specs
    except ImportError:  # the reward library is not installed in this checkout yet
        return
    try:
        validate_reward_specs(reward_config.rewards)
    except ValueError as exc:
        raise ConfigError(f"rewards: {exc}") from None
