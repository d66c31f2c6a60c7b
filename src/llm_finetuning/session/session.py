"""``Session``: what a run or a tool works with, opened one way.

Opening a model takes steps in an order that matters: ask for Unsloth's sleep mode before anything may import
it, choose the backend and import its libraries first (Unsloth patches transformers, trl and peft as it
loads), turn their chatter off, decide the run's plan, load the model (built first by the main process when it
is a builtin), hand any engine Unsloth built with it to the one owner of vLLM engines, and pick what
evaluation generates with. ``pipeline.run`` and every tool (``tools/common.load_model``) open a session here,
so none of them repeats or reorders the steps.

    session = Session.open(config)             # backend, libraries, plan; no model yet
    session.load()                             # the base model with a fresh LoRA (a run), or
    session.load(adapter)                      # base + saved adapter in eval mode (a tool)
    engine, reason = session.open_engine()     # what evaluation generates with
    ...
    session.free()                             # every vLLM engine ends, then the model goes
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..model import Backend, ModelManager, base_model_path, choose_backend
from ..rollout import EngineOwner
from ..rollout.unsloth import request_standby
from ..runtime.distributed import deepspeed_config_before_load, main_process_first
from ..runtime.hardware import Machine
from ..runtime.logging_setup import quiet_libraries
from .plan import RunPlan

__all__ = ["Session"]

logger = logging.getLogger(__name__)


@dataclass
class Session:
    """The config, the plan, the model (``manager``), every vLLM engine (``engines``) and, once opened, what
    evaluation generates with (``engine``, and why)."""

    config: PipelineConfig
    plan: RunPlan
    manager: ModelManager
    engines: EngineOwner
    engine: Any = None  # generation.engines: set by open_engine
    engine_reason: str | None = None
    deepspeed_config: Any = None  # held while the model lives (ZeRO-3 partitions the weights as they load)

    @classmethod
    def open(cls, config: PipelineConfig, *, main: bool = True,
             check: Callable[[Backend], None] | None = None) -> Session:  # fmt: skip
        """The backend chosen and its libraries imported first, then quieted (``main``: this process shows
        what the run says); ``check(backend)`` refuses a backend before its libraries load. No model yet."""
        machine = Machine.probe()  # once: CUDA and vLLM are not asked again (the backend carries the answer)
        request_standby(config, machine)  # read by Unsloth when it is imported, which choosing it may do
        backend = choose_backend(config.model, machine)  # once: the manager, the phases and the engines get it
        if check is not None:
            check(backend)
        backend.prepare()  # Unsloth is imported here, before anything imports trl or transformers
        quiet_libraries(main=main)  # their bars and chatter off where they start (unless --verbose)
        plan = RunPlan.resolve(config, backend)  # once: rollouts, correction, precision, reference
        return cls(config, plan, ModelManager(config, backend, plan.precision),
                   EngineOwner(config, machine, plan.precision.weights_name))  # fmt: skip

    @classmethod
    def for_inference(cls, config: PipelineConfig, saved: str | Path) -> Session:
        """A session holding base + the save at ``saved`` (an adapter, or a full or merged model) in eval mode:
        ``.manager.model`` and ``.manager.tokenizer``, then ``free()``. The tokenizer and its chat template come
        from the save; a deleted builtin base model is rebuilt from the config."""
        return cls.open(config).load(saved)

    @property
    def backend(self) -> Backend:
        return self.plan.backend

    def load(self, adapter: str | Path | None = None) -> Session:
        """The model: with no ``adapter``, the base model and a fresh LoRA adapter, ready to train (a builtin
        base model is built once, by the main process); with one, base + that save (LoRA or full) in eval
        mode. An engine Unsloth built with the model joins the owner; the plan learns what depends on the
        model (the shared-token passes)."""
        if adapter is None:
            with main_process_first():
                base_model_path(self.config)
            self.deepspeed_config = deepspeed_config_before_load()
            self.manager.load()
        else:
            self.manager.load_saved(adapter)
        if (carried := self.backend.model_engine(self.manager.model)) is not None:
            self.engines.adopt(carried, "unsloth")  # built with the model (fast_inference)
        self.plan = self.plan.with_model(self.config, self.manager.model)
        return self

    def open_engine(self, *, trains: bool = False) -> tuple[Any, str]:
        """What evaluation (or a tool) generates with, ``evaluation.engine``'s choice, and why; a run that
        trains shares TRL's engine when GRPO's rollouts use one."""
        from ..rollout import open_engine

        self.engine, self.engine_reason = open_engine(
            self.config.evaluation.engine, self.manager, self.engines,
            rollouts_use_vllm=trains and self.plan.trl_engine,
        )  # fmt: skip
        return self.engine, self.engine_reason

    def free(self) -> None:
        """End every vLLM engine, then drop the model (callers drop their own references). A failure to end an
        engine is logged, not raised: it must neither keep the model's memory nor hide why the work stopped."""
        try:
            self.engines.shutdown()
        except Exception:
            logger.exception("could not shut the vLLM engine down")
        finally:
            self.manager.free()
