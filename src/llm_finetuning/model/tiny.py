"""The offline demo base model ``builtin:tiny-qwen3``: a random Qwen3 and a tokenizer trained on the task text.

Why: the whole pipeline must run end to end on a CPU with no Hub access. A ~1 M-parameter Qwen3 trained from
scratch learns the tag format and small-number arithmetic in a few minutes (figures in docs/benchmarks.md).

The tokenizer is byte-level BPE trained locally with the ``tokenizers`` library. Digits are split one per
token (a ``Digits`` pre-tokenizer before ``ByteLevel``), which helps a small model with arithmetic. The four
tags are added as ordinary, *non-special* tokens: TRL decodes completions with special tokens skipped, and
special tags would vanish before the rewards saw them.

The build is deterministic from ``TinyModelSettings.seed`` and cached under
``<output_dir>/.tiny_base/<hash>/``, where the hash covers the settings, the tags, the system prompt and the
corpus. It is built in a temporary sibling directory and renamed into place, so a crash never leaves a
half-written cache. The result loads like any Hub model:

    >>> path = build_tiny_base(TinyModelSettings(), PromptConfig(), ["What is 1 + 2?"], "outputs")  # doctest: +SKIP
    >>> AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)            # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

from ..config import PipelineConfig, PromptConfig, TinyModelSettings

__all__ = [
    "EOS_TOKEN",
    "PAD_TOKEN",
    "TINY_MODEL_NAME",
    "TURN_TOKEN",
    "build_tiny_base",
    "build_tiny_for_run",
    "tiny_cache_dir",
]

logger = logging.getLogger(__name__)

TINY_MODEL_NAME = "builtin:tiny-qwen3"
EOS_TOKEN = "<|im_end|>"  # ends every turn (the chat template's eos)
PAD_TOKEN = "<|endoftext|>"  # distinct from eos so padding is never mistaken for a turn end
TURN_TOKEN = "<|im_start|>"  # opens a turn in the chat template
_SPECIAL_TOKENS = [PAD_TOKEN, TURN_TOKEN, EOS_TOKEN]
_MANIFEST = "tiny_manifest.json"  # written last inside the build: its presence marks a finished build
_BUILD_VERSION = 2  # bump when the build recipe changes, so old caches are not reused

# Used when no corpus is given (e.g. a quick check): enough to give digits, operators and the words of a
# question their own merges. The pipeline passes texts from the demo data instead.
_FALLBACK_CORPUS = [
    "What is 12 + 7? 12 + 7 = 19",
    "What is 20 - 13? 20 - 13 = 7",
    "Compute 3 * 4 and give the answer. 3 * 4 = 12",
    "0 1 2 3 4 5 6 7 8 9 + - * / = ?",
]


def build_tiny_for_run(config: PipelineConfig) -> Path:
    """The run's tiny base: its tokenizer is trained on the demo's own text (training problems, tags, prompt).

    The one place that decides the corpus: training, the tools and the tests must build the same tiny base
    (its cache key includes the corpus), so none of them assembles it on its own.
    """
    from ..data.synthetic import tokenizer_corpus

    corpus = tokenizer_corpus(config.data.synthetic, config.problem_seed, config.prompt)
    return build_tiny_base(
        config.model.tiny, config.prompt, corpus, config.output_dir, config.model.max_seq_length
    )


def tiny_cache_dir(
    settings: TinyModelSettings,
    prompt: PromptConfig,
    corpus: list[str],
    output_dir: str | Path,
    max_seq_length: int,
) -> Path:
    """Where the tiny base for these inputs lives: ``<output_dir>/.tiny_base/<hash>/``."""
    digest = hashlib.sha256()
    key = {
        "version": _BUILD_VERSION,
        "settings": dataclasses.asdict(settings),
        "max_seq_length": max_seq_length,
        "tags": [prompt.reasoning_start, prompt.reasoning_end, prompt.solution_start, prompt.solution_end],
        "system_prompt": prompt.system_prompt,
    }
    digest.update(json.dumps(key, sort_keys=True).encode())
    for text in corpus:
        digest.update(text.encode())
        digest.update(b"\0")
    return Path(output_dir).resolve() / ".tiny_base" / digest.hexdigest()[:16]


def build_tiny_base(
    settings: TinyModelSettings,
    prompt: PromptConfig,
    corpus: Iterable[str] | None,
    output_dir: str | Path,
    max_seq_length: int = 2048,
) -> Path:
    """Build (or reuse) the tiny base model and tokenizer; return the directory to ``from_pretrained`` from."""
    texts = list(corpus) if corpus is not None else []
    if not texts:
        logger.warning(
            "tiny model: no tokenizer corpus given; training the tokenizer on a small built-in text"
        )
        texts = list(_FALLBACK_CORPUS)
    target = tiny_cache_dir(settings, prompt, texts, output_dir, max_seq_length)
    if (target / _MANIFEST).is_file():
        logger.info("tiny model: reusing %s", target)
        return target
    if target.exists():  # a directory without a manifest is not ours to trust
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _build_into(staging, settings, prompt, texts, max_seq_length)
        os.replace(staging, target)
    except OSError:
        if not (target / _MANIFEST).is_file():  # not a lost race with another builder: a real failure
            raise
        logger.info("tiny model: another process finished %s first; using it", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("tiny model: built %s", target)
    return target


def _build_into(
    directory: Path, settings: TinyModelSettings, prompt: PromptConfig, texts: list[str], max_seq_length: int
) -> None:
    tokenizer = _train_tokenizer(settings, prompt, texts, max_seq_length)
    model = _init_model(settings, tokenizer, max_seq_length)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    manifest = {
        "model_name": TINY_MODEL_NAME,
        "settings": dataclasses.asdict(settings),
        "corpus_texts": len(texts),
    }
    (directory / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _train_tokenizer(
    settings: TinyModelSettings, prompt: PromptConfig, texts: list[str], max_seq_length: int
):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=settings.vocab_size,
        special_tokens=_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tags = [prompt.reasoning_start, prompt.reasoning_end, prompt.solution_start, prompt.solution_end]
    tokenizer.train_from_iterator([*texts, prompt.system_prompt, " ".join(tags)], trainer=trainer)
    tokenizer.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in tags])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN, model_max_length=max_seq_length
    )


def _init_model(settings: TinyModelSettings, tokenizer, max_seq_length: int):
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=settings.num_key_value_heads,
        head_dim=settings.hidden_size // settings.num_attention_heads,
        max_position_embeddings=max_seq_length,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(settings.seed)
        model = Qwen3ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model
