"""Model settings: which base model, which backend, LoRA or full fine-tuning, the offline demo model's shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..schema import option, require


@dataclass
class LoraSettings:
    """LoRA adapter settings: the project's recipe, r=32 and alpha=64 on the attention and MLP projections."""

    enabled: bool = option(True, "false = full fine-tuning (for the tiny model trained from scratch)")
    rank: int = option(32, "LoRA rank r")
    alpha: int = option(64, "LoRA scaling alpha (the update is scaled by alpha / rank: 2 in the recipe)")
    dropout: float = option(0.0, "dropout on the LoRA input")
    target_modules: list[str] = option(
        factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        help="module names that receive adapters",
    )
    modules_to_save: list[str] = option(
        factory=list, help="modules trained in full and saved with the adapter"
    )

    def __post_init__(self) -> None:
        require(self.rank > 0, "rank", f"must be > 0 (got {self.rank})")
        require(self.alpha > 0, "alpha", f"must be > 0 (got {self.alpha})")
        require(0 <= self.dropout < 1, "dropout", f"must be in [0, 1) (got {self.dropout})")


@dataclass
class TinyModelSettings:
    """Shape of the offline demo model (a randomly initialised Qwen3) and its locally trained tokenizer."""

    hidden_size: int = option(128, "width of the residual stream")
    num_hidden_layers: int = option(4, "transformer blocks")
    num_attention_heads: int = option(4, "query heads")
    num_key_value_heads: int = option(2, "key/value heads (grouped-query attention)")
    intermediate_size: int = option(384, "MLP width")
    vocab_size: int = option(320, "target size of the byte-level BPE vocabulary")
    seed: int = option(0, "seed for weights and tokenizer training: same seed, same model")

    def __post_init__(self) -> None:
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
            require(getattr(self, key) > 0, key, f"must be > 0 (got {getattr(self, key)})")
        require(
            self.hidden_size % self.num_attention_heads == 0,
            "hidden_size",
            f"must be divisible by num_attention_heads = {self.num_attention_heads} (got {self.hidden_size})",
        )
        require(
            self.num_attention_heads % self.num_key_value_heads == 0,
            "num_key_value_heads",
            f"must divide num_attention_heads = {self.num_attention_heads} (got {self.num_key_value_heads})",
        )
        require(
            self.vocab_size >= 260,
            "vocab_size",
            f"must be >= 260: 256 byte tokens plus the special tokens (got {self.vocab_size})",
        )


@dataclass
class ModelConfig:
    """Which base model to load, through which backend, and how to adapt it."""

    model_name: str = option(
        "unsloth/Qwen3-4B-Base", 'Hub id, local path, or "builtin:tiny-qwen3" (the offline demo)'
    )
    backend: Literal["auto", "unsloth", "hf"] = option(
        "auto", "auto = unsloth when CUDA and unsloth are present"
    )
    max_seq_length: int = option(2048, "longest prompt + completion the model will see")
    load_in_4bit: bool = option(False, "4-bit quantised base (CUDA only)")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = option(
        "auto", "auto = bf16 on capable CUDA, else fp32"
    )
    gradient_checkpointing: bool = option(
        True, "trade compute for memory, on a GPU or a CPU (unsloth uses its own variant); a phase's own "
        "sft_training/grpo_training.gradient_checkpointing overrides it there (hf backend)",
    )
    lora: LoraSettings | None = option(factory=LoraSettings, help="null = full fine-tuning")
    tiny: TinyModelSettings = option(factory=TinyModelSettings, help="used only for builtin:tiny-qwen3")

    def __post_init__(self) -> None:
        require(self.max_seq_length > 0, "max_seq_length", f"must be > 0 (got {self.max_seq_length})")
        require(
            not (self.load_in_4bit and not self.uses_lora),
            "load_in_4bit",
            "4-bit weights cannot be fully fine-tuned; set a lora section or load_in_4bit: false",
        )

    @property
    def uses_lora(self) -> bool:
        return self.lora is not None and self.lora.enabled
