"""The sandbox probe served in the worker itself, call after call (``sandbox_probe.py`` says why)."""

from sandbox_probe import evaluate

from llm_finetuning.sandbox import Service

SERVICE = Service(handle=evaluate, headroom_bytes=256 << 20)
