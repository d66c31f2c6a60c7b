"""Unsloth's engine (its ``fast_inference``, on unless ``grpo_training.use_vllm`` is false): asking for its sleep
mode before it exists, and its teardown.

``FastLanguageModel.from_pretrained`` builds the engine with the model (``model/unsloth_backend.py``); its life
around that is here. Unsloth reads ``UNSLOTH_VLLM_STANDBY`` once, when it is imported, and its trainer then
takes TRL's ``vllm_enable_sleep_mode`` from the engine, so the run asks before the backend is prepared.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from ..config import PipelineConfig
from ..runtime.hardware import Machine
from .start import shut_down

__all__ = ["delete_engine", "request_standby"]

logger = logging.getLogger(__name__)


def request_standby(config: PipelineConfig, machine: Machine) -> None:
    """Ask Unsloth's engine for sleep mode when GRPO's ``vllm_enable_sleep_mode`` is on (harmless otherwise)."""
    grpo = config.grpo_training
    wanted = grpo.vllm_enable_sleep_mode and grpo.vllm_allowed and machine.cuda
    if wanted and "unsloth" in sys.modules and os.environ.get("UNSLOTH_VLLM_STANDBY", "0") == "0":
        logger.warning("grpo_training.vllm_enable_sleep_mode: unsloth was imported before the run could ask "
                       "for its engine's sleep mode; set UNSLOTH_VLLM_STANDBY=1 before importing it")
    elif wanted:
        os.environ.setdefault("UNSLOTH_VLLM_STANDBY", "1")


def delete_engine(llm: Any) -> None:
    """Release Unsloth's engine even though the model still refers to it, then Unsloth's own bookkeeping
    (its flashinfer block, process groups)."""
    shut_down(llm)
    from unsloth_zoo.vllm_utils import delete_vllm

    delete_vllm(llm)
