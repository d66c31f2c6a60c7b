"""A model's shape without loading it: for the memory estimate and for rules that depend on the model's size.

The shape comes from the tiny demo model's settings, a local folder's ``config.json``, or ``KNOWN_SHAPES`` (the
default model and the builtin SmolLM2, so both work offline).

    >>> from llm_finetuning.config import PipelineConfig
    >>> model_shape(PipelineConfig.from_dict({"model": {"model_name": "builtin:smollm2-135m-instruct"}})).parameters
    134515008
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..config import PipelineConfig
from ..errors import ModelError
from .sources import SMOLLM2_NAME
from .tiny import TINY_MODEL_NAME

__all__ = ["KNOWN_SHAPES", "ModelShape", "model_shape", "parameter_count", "shape_from_config_json"]


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder-only transformer (Llama/Qwen family), as its config.json describes it."""

    hidden_size: int
    num_layers: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    qk_norm: bool = True  # Qwen3 normalises queries and keys per head; Llama has no such weights

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """``(in, out)`` features of each projection in one layer, by peft's module name."""
        hidden, attention, kv = self.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return {"q_proj": (hidden, attention), "k_proj": (hidden, kv), "v_proj": (hidden, kv),
                "o_proj": (attention, hidden), "gate_proj": (hidden, self.intermediate_size),
                "up_proj": (hidden, self.intermediate_size), "down_proj": (self.intermediate_size, hidden)}  # fmt: skip

    @property
    def embedding_parameters(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def linear_parameters(self) -> int:
        """Parameters in the layers' projections: what 4-bit quantises."""
        return self.num_layers * sum(i * o for i, o in self.module_shapes().values())

    @property
    def parameters(self) -> int:
        per_layer = 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)
        norms = self.num_layers * per_layer + self.hidden_size
        heads = 1 if self.tied_embeddings else 2
        return self.linear_parameters + heads * self.embedding_parameters + norms

    def lora_parameters(self, rank: int, targets: list[str], modules_to_save: list[str]) -> int:
        shapes = self.module_shapes()
        adapters = self.num_layers * sum(rank * sum(shapes[name]) for name in targets if name in shapes)
        copies = sum(self.embedding_parameters for name in modules_to_save if name in ("embed_tokens", "lm_head"))
        if self.tied_embeddings and {"embed_tokens", "lm_head"} <= set(modules_to_save):
            copies -= self.embedding_parameters  # one trained copy serves both
        return adapters + copies

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    def activation_elements_per_token(self) -> int:
        """Values one layer keeps per token for backward (SDPA/flash attention: no seq x seq scores)."""
        attention, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return 4 * self.hidden_size + 2 * attention + 2 * kv + 4 * self.intermediate_size


# config.json of unsloth/Qwen3-4B-Base (= Qwen/Qwen3-4B-Base): 4,022,468,096 parameters.
_QWEN3_4B = ModelShape(2560, 36, 9728, 32, 8, 128, 151936, True)
# SmolLM2-135M-Instruct (the builtin): Llama, 30 layers, hidden 576, 9 query / 3 key-value heads, tied embeddings
_SMOLLM2_135M = ModelShape(hidden_size=576, num_layers=30, intermediate_size=1536, num_heads=9, num_kv_heads=3,
                           head_dim=64, vocab_size=49152, tied_embeddings=True, qk_norm=False)  # fmt: skip
KNOWN_SHAPES = {"unsloth/Qwen3-4B-Base": _QWEN3_4B, "Qwen/Qwen3-4B-Base": _QWEN3_4B, SMOLLM2_NAME: _SMOLLM2_135M}


def model_shape(config: PipelineConfig) -> ModelShape:
    """The base model's shape: the tiny demo's settings, a local config.json, or a known Hub model."""
    model = config.model
    if model.model_name == TINY_MODEL_NAME:
        tiny = model.tiny
        return ModelShape(tiny.hidden_size, tiny.num_hidden_layers, tiny.intermediate_size, tiny.num_attention_heads,
                          tiny.num_key_value_heads, tiny.hidden_size // tiny.num_attention_heads, tiny.vocab_size, True)  # fmt: skip
    local = Path(model.model_name) / "config.json"
    if local.is_file():
        return shape_from_config_json(json.loads(local.read_text()))
    if model.model_name in KNOWN_SHAPES:
        return KNOWN_SHAPES[model.model_name]
    raise ModelError(
        f"model.model_name: the size of {model.model_name} is unknown offline; point model_name at a local "
        f"directory with its config.json (known: {', '.join(sorted(KNOWN_SHAPES))})"
    )


def shape_from_config_json(data: dict) -> ModelShape:
    text = data.get("text_config") or data  # multimodal configs nest the language model's
    heads = text["num_attention_heads"]
    return ModelShape(
        hidden_size=text["hidden_size"], num_layers=text["num_hidden_layers"],
        intermediate_size=text["intermediate_size"], num_heads=heads,
        num_kv_heads=text.get("num_key_value_heads") or heads,
        head_dim=text.get("head_dim") or text["hidden_size"] // heads, vocab_size=text["vocab_size"],
        tied_embeddings=bool(data.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
        qk_norm=str(text.get("model_type", data.get("model_type", ""))).startswith("qwen3"),
    )  # fmt: skip




def parameter_count(config: PipelineConfig) -> int | None:
    """The base model's parameter count, None where its shape is unknown offline."""
    try:
        return model_shape(config).parameters
    except ModelError:
        return None
