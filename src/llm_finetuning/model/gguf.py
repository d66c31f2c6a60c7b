"""A GGUF model file as a normal transformers folder: converted once, cached, with its tokenizer repaired.

transformers reads a GGUF file (``from_pretrained(folder, gguf_file=name)``, de-quantising the weights to fp32)
but will not save a model loaded that way, and the tokenizer it builds from GGUF metadata is often wrong in the
ways that break fine-tuning: SmolLM2-135M-Instruct's says its eos is ``<|im_start|>`` (the start of a turn)
while the model's config and chat template end each turn with ``<|im_end|>``, and it has no pad token, so
batched generation refuses to pad and generation never stops at the end of the assistant's turn.

``converted_folder`` rebuilds the model from its config (the quantisation entry dropped), loads the
de-quantised weights into it and saves a safetensors folder that loads without ``gguf``; it repairs the
tokenizer (``repair_tokenizer``) and makes the model's config agree with it; every repair is logged and
written, with the source file and its SHA-256, to ``gguf_source.json``, which is written last: its presence
marks a finished conversion. The folder is built beside its final place and renamed into it, so a crash
never leaves half a model; the next run reuses it.

    >>> folder = converted_folder(Path("SmolLM2-135M-Instruct.Q4_1.gguf"), cache_root())   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..errors import ModelError
from .own_template import added_token_opening

__all__ = ["MANIFEST", "cache_root", "converted_folder", "repair_tokenizer"]

logger = logging.getLogger(__name__)

MANIFEST = "gguf_source.json"  # written last: a converted folder without it is not trusted
_CACHE_ENV = "LLM_FINETUNING_CACHE"


def cache_root() -> Path:
    """Where converted models are kept: ``$LLM_FINETUNING_CACHE``, else ``$XDG_CACHE_HOME/llm-finetuning``,
    else ``~/.cache/llm-finetuning``."""
    if os.environ.get(_CACHE_ENV):
        return Path(os.environ[_CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "llm-finetuning"


def converted_folder(gguf_file: Path, root: Path) -> Path:
    """The cached transformers folder for ``gguf_file`` (converting it on first use)."""
    if not gguf_file.is_file():
        raise ModelError(f"model.model_name: {gguf_file} is not a file; point it at a .gguf model file")
    digest = _sha256(gguf_file)
    target = root / "converted" / f"{gguf_file.stem}-{digest[:12]}"
    if (target / MANIFEST).is_file():
        logger.info("model: reusing %s (converted from %s)", target, gguf_file.name)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        logger.info("model: converting %s to a transformers folder (once; cached in %s)", gguf_file.name, target)
        repairs = _convert_into(staging, gguf_file)
        manifest = {"source": str(gguf_file), "sha256": digest, "tokenizer_repairs": repairs}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
        if target.exists():  # a folder without the manifest is not ours to trust
            shutil.rmtree(target)
        os.replace(staging, target)
    except OSError:
        if not (target / MANIFEST).is_file():  # not a lost race with another converter: a real failure
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert_into(staging: Path, gguf_file: Path) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise ModelError(f"model.model_name: reading {gguf_file.name} needs the gguf package; install it with "
                         "uv sync --extra smollm2 (or pip install gguf)")  # fmt: skip
    folder, name = str(gguf_file.parent), gguf_file.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except (ValueError, KeyError, OSError, TypeError, IndexError, RuntimeError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ModelError(f"model.model_name: {gguf_file} could not be read as a GGUF model ({reason}); point it "
                         "at a llama.cpp GGUF file of a model transformers supports") from None  # fmt: skip
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are de-quantised: the folder is a plain fp32 model
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    repairs = repair_tokenizer(tokenizer, model)
    model.save_pretrained(str(staging))
    tokenizer.save_pretrained(str(staging))
    return repairs


def repair_tokenizer(tokenizer: Any, model: Any) -> list[str]:
    """Make eos the token that ends a turn in the tokenizer's chat template, give it a pad token, and make the
    model's config and generation config name the same ids; return the repairs made (each is logged)."""
    repairs = []
    end_of_turn = _end_of_turn(tokenizer)
    if end_of_turn is not None and end_of_turn != tokenizer.eos_token:
        repairs.append(f"eos {tokenizer.eos_token!r} -> {end_of_turn!r}: the chat template ends each turn with it")
        tokenizer.eos_token = end_of_turn
    if tokenizer.pad_token is None:
        pad = tokenizer.unk_token if tokenizer.unk_token not in (None, tokenizer.eos_token) else tokenizer.eos_token
        repairs.append(f"pad None -> {pad!r}: batched generation pads; a token that is not eos never ends a turn")
        tokenizer.pad_token = pad
    for target in (model.config, getattr(model, "generation_config", None)):
        for field in ("eos_token_id", "pad_token_id"):
            wanted = getattr(tokenizer, field)
            if target is not None and getattr(target, field, None) != wanted:
                repairs.append(f"{type(target).__name__}.{field} {getattr(target, field, None)} -> {wanted}")
                setattr(target, field, wanted)
    for repair in repairs:
        logger.info("model: tokenizer repaired: %s", repair)
    return repairs


_PROBE = "\u2063probe\u2063"  # text no template writes by itself


def _end_of_turn(tokenizer: Any) -> str | None:
    """The single token the chat template writes right after an assistant message, if it has one."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _PROBE}], tokenize=False
        )
    except Exception:  # noqa: BLE001 - a template that cannot render a plain exchange tells nothing
        return None
    return added_token_opening(tokenizer, rendered.partition(_PROBE)[2])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
