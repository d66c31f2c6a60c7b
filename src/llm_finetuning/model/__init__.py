"""Model layer: the backends (unsloth / transformers+peft), the chat template, the offline tiny model, atomic saves.

Importing this package is cheap and safe on any machine: it never imports unsloth, vllm, transformers or
peft. That matters because unsloth must be imported before trl/transformers: choose the backend
(``choose_backend``) and call its ``prepare()`` before importing trl.
"""

from .adapters import atomic_directory
from .backend import Backend, Rollouts
from .backends import BACKENDS, choose_backend, get_backend
from .manager import ModelManager
from .sources import BUILTIN_MODELS, SMOLLM2_NAME, base_model_path
from .template import render_chat_template
from .tiny import TINY_MODEL_NAME, build_tiny_base

__all__ = [
    "BACKENDS",
    "BUILTIN_MODELS",
    "SMOLLM2_NAME",
    "TINY_MODEL_NAME",
    "Backend",
    "ModelManager",
    "Rollouts",
    "atomic_directory",
    "base_model_path",
    "build_tiny_base",
    "choose_backend",
    "get_backend",
    "render_chat_template",
]
