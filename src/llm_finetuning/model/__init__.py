"""Model layer: backends (unsloth / transformers+peft), the chat template, the offline tiny model, atomic saves.

Importing this package is cheap and safe on any machine: it never imports unsloth, vllm, transformers or
peft. That matters because unsloth must be imported before trl/transformers: call ``choose_backend`` (or
build a ``ModelManager``) before importing trl.
"""

from .adapters import atomic_directory
from .backends import BACKENDS, choose_backend, get_backend
from .manager import ModelManager
from .template import render_chat_template
from .tiny import BUILTIN_MODELS, TINY_MODEL_NAME, base_model_path, build_tiny_base
from .unsloth_backend import import_unsloth

__all__ = [
    "BACKENDS",
    "BUILTIN_MODELS",
    "TINY_MODEL_NAME",
    "ModelManager",
    "atomic_directory",
    "base_model_path",
    "build_tiny_base",
    "choose_backend",
    "get_backend",
    "import_unsloth",
    "render_chat_template",
]
