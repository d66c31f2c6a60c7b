"""The generation engines and the rule that picks one: evaluation, the tools and debugging all go through here.

| engine | generates with | weights |
| --- | --- | --- |
| ``hf`` | ``model.generate``, batched | the model itself |
| ``vllm`` | a vLLM engine of the run, on the base model | the model's current weights (LoRA folded in), pushed before generating |
| ``unsloth`` | the engine Unsloth built at load (``model.fast_generate``) | shared with the model; LoRA through ``model.load_lora`` |

``evaluation.engine`` (and the tools' ``--engine``) is ``auto``, ``hf`` or ``vllm``. ``auto`` takes the engine
the model already has (Unsloth's), else the engine GRPO's rollouts will use anyway, else vLLM where it loads
and pays off (``hardware.vllm_pays_off``: on a CUDA GPU; on a CPU for a model of 50M parameters or more, where
its start, about 8 s, 20 s with vLLM's import, costs less than it saves), else hf. Asking for ``vllm`` on a
model that carries Unsloth's engine uses that engine: never a second one on the same GPU.

    >>> engine, reason = open_engine("auto", session.manager, session.engines)            # doctest: +SKIP
    >>> engine.generate([conversation], SamplingSettings(greedy=True, max_new_tokens=32))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import ModelError
from ..model import Backend
from ..model.hardware import vllm_pays_off
from .hf import generate_detailed
from .settings import Completion, Conversation, Progress, SamplingSettings
from .vllm import UnslothEngine, VLLMEngine

__all__ = ["ENGINES", "GenerationEngine", "HFEngine", "choose_engine", "get_engine", "open_engine"]

logger = logging.getLogger(__name__)




class GenerationEngine(Protocol):
    """What evaluation and the tools call: completions for conversations, bound to a ``ModelManager``."""

    name: str

    def generate(
        self, prompts: Sequence[Conversation | str], sampling: SamplingSettings, *, batch_size: int = 32,
        progress: Progress | None = None,
    ) -> list[list[Completion]]:
        """``sampling.per_prompt`` completions for each prompt, in prompt order; ``progress`` is told how many
        completions are done as they finish (a ``progress.ProgressView``'s ``advance``)."""


class HFEngine:
    """``model.generate`` on the manager's model (any backend, any device), or on ``model`` when given (the
    trainer's unwrapped model during training)."""

    name = "hf"

    def __init__(self, manager: Any, engines: Any = None, model: Any = None) -> None:
        self.manager, self.model = manager, model

    def generate(
        self, prompts: Sequence[Conversation | str], sampling: SamplingSettings, *, batch_size: int = 32,
        progress: Progress | None = None,
    ) -> list[list[Completion]]:
        model = self.manager.model if self.model is None else self.model
        return generate_detailed(model, self.manager.tokenizer, prompts, sampling, batch_size=batch_size,
                                 progress=progress)  # fmt: skip


ENGINES: dict[str, type] = {"hf": HFEngine, "vllm": VLLMEngine, "unsloth": UnslothEngine}


def get_engine(name: str, manager: Any, engines: Any = None) -> GenerationEngine:
    """The engine registered under ``name``, bound to ``manager`` (and the run's ``EngineOwner``, for vllm)."""
    if name not in ENGINES:
        raise ModelError(f"unknown generation engine {name!r}; valid: {', '.join(sorted(ENGINES))}")
    return ENGINES[name](manager, engines)


def choose_engine(
    choice: str, *, backend: Backend, model: Any, model_config: Any, rollouts_use_vllm: bool = False,
    multi_process: bool = False,
) -> tuple[str, str]:
    """``(engine name, reason)`` for ``choice`` (auto | hf | vllm); a ModelError for a vllm that cannot run.

    ``rollouts_use_vllm``: GRPO will generate with a vLLM engine in this process anyway (its engine is shared).
    ``multi_process``: one of several launched processes, where the vllm engine (one process's) is not built.
    """
    if choice not in ("auto", "hf", "vllm"):
        raise ModelError(f"evaluation.engine: unknown engine {choice!r}; valid: auto, hf, vllm")
    if choice == "hf":
        return "hf", "hf was asked for"
    if backend.model_engine(model) is not None:
        return "unsloth", f"{choice}: the model carries Unsloth's vLLM engine (fast_inference); generating on it"
    problem = backend.machine.vllm_problem
    if multi_process:
        problem = problem or "the vllm engine runs in a single process, and this launch has several"
    refusal = backend.vllm_refusal(model_config)
    if choice == "vllm":
        if problem:
            raise ModelError(f"engine vllm: {problem}; or generate with engine hf")
        if refusal:
            raise ModelError(f"engine vllm: {refusal}; use engine hf, or the unsloth backend (its own engine)")
        return "vllm", "vllm was asked for"
    if problem:
        return "hf", f"auto: {problem}"
    if rollouts_use_vllm:
        return "vllm", "auto: GRPO generates with vLLM here, so evaluation shares its engine"
    if refusal:
        return "hf", f"auto: {refusal}"
    worth, why = vllm_pays_off(_parameters(model), backend.machine.cuda)
    return ("vllm" if worth else "hf"), f"auto: {why}"


def _parameters(model: Any) -> int | None:
    """The loaded model's parameter count (what decides whether vLLM pays off on a CPU)."""
    parameters = getattr(model, "parameters", None)
    return sum(p.numel() for p in parameters()) if callable(parameters) else None


def open_engine(choice: str, manager: Any, engines: Any, *, rollouts_use_vllm: bool = False) -> tuple[Any, str]:
    """The generation engine ``choice`` picks for the manager's loaded model, and why (logged).

    ``engines`` is the run's ``rollout.EngineOwner``, which the vllm engine asks for a ready engine.
    """
    from ..runtime.distributed import read_launch

    name, reason = choose_engine(
        choice, backend=manager.backend, model=manager.model, model_config=manager.config.model,
        rollouts_use_vllm=rollouts_use_vllm, multi_process=read_launch().is_distributed,
    )  # fmt: skip
    logger.info("generation engine: %s (%s)", name, reason)
    return get_engine(name, manager, engines), reason
