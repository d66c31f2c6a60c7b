"""What the tests share: the demo config shrunk for tests, one small tiny model and its tokenizer per session.

- ``tiny_config(*overrides)`` (a fixture): ``configs/tiny.yaml`` with ``output_dir`` in the test's tmp_path,
  a smaller model (``SMALL_MODEL``) and any ``section.field=value`` overrides; ``TEST_SCHEDULE`` shortens
  training for the end-to-end runs.
- ``tiny_base`` / ``tiny_tokenizer`` (session fixtures): one small tiny model, built once, and its tokenizer
  with the chat template, for tests that need a real tokenizer or model but no training.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llm_finetuning.config import PipelineConfig, PromptConfig, TinyModelSettings

ROOT = Path(__file__).resolve().parents[1]
TINY_YAML = ROOT / "configs" / "tiny.yaml"

SMALL = TinyModelSettings(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64
)
SMALL_MODEL = [f"model.tiny.{name}={getattr(SMALL, name)}" for name in
               ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size")]
# The demo's schedule cut to what a test needs: enough SFT to learn the format, a few GRPO steps, few problems.
TEST_SCHEDULE = [
    "sft_training.max_steps=120",
    "sft_training.save_steps=60",
    "sft_training.logging_steps=20",
    "grpo_training.max_steps=4",
    "grpo_training.save_steps=2",
    "grpo_training.eval_steps=2",
    "grpo_training.per_device_train_batch_size=16",
    "grpo_training.num_generations=4",
    "grpo_training.max_completion_length=32",  # the demo's column working needs about 28 tokens
    "evaluation.num_samples=24",
    "evaluation.sampled_k=2",
    "evaluation.batch_size=24",
    "data.synthetic.num_eval=24",
]
CORPUS = [f"What is {a} + {b}? {a} + {b} = {a + b}" for a in range(10) for b in range(10)]


def demo_config(output_dir: Path, *overrides: str) -> PipelineConfig:
    """The demo config with ``output_dir`` and overrides (the demo's own model size unless overridden)."""
    return PipelineConfig.from_yaml(TINY_YAML, [f"output_dir={output_dir}", *overrides])


@pytest.fixture
def tiny_config(tmp_path) -> Callable[..., PipelineConfig]:
    """``tiny_config(*overrides)``: the demo config with a small model, writing into this test's tmp_path."""

    def make(*overrides: str, output_dir: Path | None = None) -> PipelineConfig:
        return demo_config(output_dir or tmp_path, *SMALL_MODEL, *overrides)

    return make


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A small tiny model (weights + tokenizer) built once per test session."""
    from llm_finetuning.model import build_tiny_base

    return build_tiny_base(SMALL, PromptConfig(), CORPUS, tmp_path_factory.mktemp("tiny_base"), max_seq_length=512)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_base):
    """The small tiny model's tokenizer with our chat template, pad token and left padding."""
    from transformers import AutoTokenizer

    from llm_finetuning.model.template import apply_chat_template_to

    return apply_chat_template_to(AutoTokenizer.from_pretrained(tiny_base), PromptConfig())
