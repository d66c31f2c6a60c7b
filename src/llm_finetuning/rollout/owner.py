"""``EngineOwner``: the one owner of the vLLM engine in this process, and the rule for who owns what.

A run (or a tool) makes one ``EngineOwner`` and asks it for every engine; it holds at most one at a time
(never two on one device) and tears it down (``shutdown``) when the run ends:

- **ours** (``kind="ours"``): started on first use for generation (evaluation, the tools), on the base model,
  fed the trained weights before generating (``weights.push_weights``; again whenever they change). Outside
  GRPO it lives for one evaluation (``release_own``): SFT never holds a second copy of the weights.
- **TRL's colocated engine** (``kind="trl"``): started by TRL's ``GRPOTrainer`` (``trl.trl_engine_start``) and
  adopted here in a single-process run, so evaluation during and after GRPO shares it; TRL keeps it in a
  multi-process launch, whose process group vLLM's teardown would destroy.
- **Unsloth's engine** (``kind="unsloth"``): built with the model by ``FastLanguageModel`` (``fast_inference``),
  adopted when the model loads; it shares the model's weights and is torn down with ``unsloth.delete_engine``.

``ready(model)`` is how a generation engine uses ours or TRL's: it wakes an engine TRL put to sleep, pushes the
model's weights when they changed since the last push, and puts it back to sleep afterwards.

    owner = Session.open(config).engines              # the run's: its device and weights' dtype
    with owner.ready(manager.model, manager.base_path) as llm:   # started on first use
        outputs = llm.generate(requests, params)
    owner.shutdown()
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from ..config import PipelineConfig
from ..runtime.hardware import Machine
from .start import shut_down, start_engine
from .weights import model_weights, push_weights, weights_version

__all__ = ["EngineOwner", "RunningEngine"]

logger = logging.getLogger(__name__)

EngineKind = Literal["ours", "trl", "unsloth"]


@dataclass
class RunningEngine:
    """A ``vllm.LLM`` in this process, what started it, and the weights version it last received."""

    llm: Any
    kind: EngineKind
    pushed: tuple[float, ...] | None = None


class EngineOwner:
    """Holds the process's vLLM engine (ours, TRL's or Unsloth's) and ends it."""

    def __init__(self, config: PipelineConfig, machine: Machine, dtype: str) -> None:
        self.config = config
        self.machine, self.dtype = machine, dtype  # the run's (Session.open's): its device and weights' dtype
        self.running: RunningEngine | None = None

    def adopt(self, llm: Any, kind: EngineKind) -> None:
        """Own ``llm``, an engine another library started (TRL's trainer, Unsloth's model)."""
        if self.running is not None and self.running.llm is llm:
            return
        self.shutdown()
        self.running = RunningEngine(llm, kind)
        logger.debug("vLLM engine adopted (%s)", kind)

    @contextmanager
    def ready(self, model: Any, base_path: str) -> Iterator[Any]:
        """The engine to generate with ``model``'s current weights: ours is started on ``base_path`` if none runs."""
        if self.running is None:
            self.running = RunningEngine(start_engine(self.config, base_path, self.machine.cuda, self.dtype), "ours")
        running = self.running
        llm = running.llm
        asleep = llm.llm_engine.is_sleeping()  # TRL's engine with vllm_enable_sleep_mode, between its rollouts
        if asleep:
            llm.wake_up()
        version = weights_version(model)
        if asleep or version != running.pushed:  # after a sleep (level 2) the engine holds no weights at all
            push_weights(llm, model_weights(model, changing_only=running.pushed is not None and not asleep))
            running.pushed = version
        try:
            yield llm
        finally:
            if asleep:  # as TRL left it: its next rollout wakes it and pushes the weights again
                llm.sleep(level=2)
                running.pushed = None

    def release_own(self) -> None:
        """Shut down an engine of ours (one started for an evaluation); TRL's and Unsloth's stay."""
        if self.running is not None and self.running.kind == "ours":
            self.shutdown()

    def shutdown(self) -> None:
        """Tear the engine down, if one runs: its model, KV cache and process groups go now."""
        running, self.running = self.running, None
        if running is None:
            return
        if running.kind == "unsloth":
            from .unsloth import delete_engine

            delete_engine(running.llm)
        else:
            shut_down(running.llm)
        logger.info("vLLM engine shut down (%s)", running.kind)
