"""``RunPlan``: what a run decides from its config and the machine, decided once, each with its reason.

The backend (``model.backends.choose_backend``), the training precision (``model/hardware.py``), what GRPO's
rollouts generate with (``Backend.choose_rollouts``), whether the importance-sampling correction is on
(``rollout/importance.py``), what the KL term anchors to and which of the sandbox's kernel layers the machine
offers its workers (``sandbox/confine.py``; a missing one is said once, here): resolved when the run starts; once
the model is loaded, whether SFT's and GRPO's passes compute shared tokens once (``training/shared_prompt.py``,
which depends on the model's attention). Recorded in ``summary.json`` and handed to everything that acts on them (the phases,
the trainer arguments, the preflight, the evaluation engine's choice), so that none of them asks again and the
record is what ran.

    >>> from llm_finetuning.config import PipelineConfig
    >>> from llm_finetuning.model.backends import get_backend
    >>> config = PipelineConfig.from_dict({"grpo_training": {"use_vllm": False}})
    >>> plan = RunPlan.resolve(config, get_backend("hf"))
    >>> plan.rollouts, plan.uses_vllm, plan.importance.correction
    ('generate', False, False)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from ..config import PipelineConfig
from ..model import Backend
from ..model.backend import Rollouts
from ..model.hardware import Precision
from ..rollout import ROLLOUTS, ImportanceSampling, RolloutKind, importance_sampling
from ..sandbox.confine import available_layers

__all__ = ["RunPlan", "SharedTokens", "reference_record", "sandbox_layers", "shared_tokens"]

logger = logging.getLogger(__name__)

_MASKABLE_ATTENTION = ("sdpa", "eager")  # attention implementations that take an arbitrary 4D mask


@dataclass(frozen=True)
class RunPlan:
    """One run's decisions (module docstring)."""

    backend: Backend
    rollouts: Rollouts  # what GRPO generates with: generate, model_engine, trl_colocate or trl_server
    rollouts_reason: str
    importance: ImportanceSampling
    precision: Precision
    reference: dict[str, str]
    cuda: bool  # the run trains on a CUDA GPU (else the CPU): what device-dependent steps ask, not torch again
    sandbox: dict[str, str]  # the kernel layers the verifier and reward workers confine themselves with
    shared_prompt: SharedTokens | None = None  # GRPO's log-prob passes; decided with the model (with_model)
    shared_prefix: SharedTokens | None = None  # SFT's loss pass; likewise

    @classmethod
    def resolve(cls, config: PipelineConfig, backend: Backend) -> RunPlan:
        """The decisions for ``config`` on this machine with ``backend``; a ConfigError where the config asks for
        what cannot work here (an importance-sampling correction no engine mode can give)."""
        rollouts, why = backend.choose_rollouts(config)
        cuda = backend.machine.cuda
        return cls(backend, rollouts, why, importance_sampling(config, ROLLOUTS[rollouts]),
                   Precision.resolve(config.model, cuda), reference_record(config), cuda, sandbox_layers())  # fmt: skip

    def with_model(self, config: PipelineConfig, model: Any) -> RunPlan:
        """The plan with what depends on the loaded ``model``: the shared-token passes of both phases."""
        return replace(
            self,
            shared_prompt=shared_tokens(config.grpo_training.shared_prompt, self.backend, model),
            shared_prefix=shared_tokens(config.sft_training.shared_prefix, self.backend, model,
                                        "sft_training.shared_prefix"),
        )

    def shares(self, phase: str) -> bool:
        """Whether ``phase`` (sft or grpo) computes shared tokens once; the plan must know the model."""
        decision = self.shared_prefix if phase == "sft" else self.shared_prompt
        if decision is None:
            raise RuntimeError("RunPlan.with_model(config, model) decides the shared-token passes once the model loads")
        return decision.on

    @property
    def rollout(self) -> RolloutKind:
        """What the rollouts' kind implies (``rollout/kinds.py``)."""
        return ROLLOUTS[self.rollouts]

    @property
    def uses_vllm(self) -> bool:
        """GRPO's rollouts come from a vLLM engine (any kind), not ``model.generate``."""
        return self.rollout.uses_vllm

    @property
    def trl_engine(self) -> bool:
        """TRL starts a vLLM engine in this process for the rollouts (evaluation shares it)."""
        return self.rollout.trl_engine

    @property
    def trl_server(self) -> bool:
        """The rollouts come from a ``trl vllm-serve`` server (checked before the model loads)."""
        return self.rollout.trl_server

    @property
    def trl_loss(self) -> bool:
        """TRL's own GRPO loss trains on vLLM rollouts (Unsloth's compiled trainer has a loss of its own)."""
        return self.rollout.trl_loss

    def described(self) -> list[str]:
        """The decisions the console shows when the model has loaded."""
        precision = self.precision
        autocast = "bf16" if precision.bf16 else "fp16" if precision.fp16 else "no"
        return [f"precision: {precision.weights_name} weights, {autocast} autocast ({precision.reason})",
                f"GRPO rollouts: {self.rollouts} ({self.rollouts_reason})",
                f"GRPO log-probs: shared prompt {self.shared_prompt.reason}",
                f"SFT: shared prefix {self.shared_prefix.reason}"]

    def record(self) -> dict[str, Any]:
        """The decisions as ``summary.json`` records them."""
        return {
            "backend": self.backend.name,
            "backend_reason": self.backend.reason,
            "precision": self.precision.record(),
            "rollouts": {"engine": self.rollouts, "reason": self.rollouts_reason},
            "importance_sampling": self.importance.record(),
            "reference": self.reference,
            "sandbox": self.sandbox,
        } | {name: decision.record() for name, decision in (("shared_prompt", self.shared_prompt),
                                                             ("shared_prefix", self.shared_prefix)) if decision}


@dataclass(frozen=True)
class SharedTokens:
    """Whether a phase computes the tokens its rows share once (``training/shared_prompt.py``), and why."""

    on: bool
    reason: str

    def record(self) -> dict[str, Any]:
        return {"on": self.on, "reason": self.reason}


def shared_tokens(asked: bool, backend: Backend, model: Any, setting: str = "grpo_training.shared_prompt",
                  ) -> SharedTokens:  # fmt: skip
    """Whether a phase's passes may compute shared tokens once (exactly), for this backend and model: the hf
    backend's transformers code, an attention that takes an arbitrary mask, no sliding-window layers (one mask
    serves every layer), no mixture-of-experts router loss; ``setting`` is the config field that asked."""
    if not asked:
        return SharedTokens(False, f"off, as configured ({setting}: false)")
    if not backend.model_code_is_transformers:
        return SharedTokens(False, f"off: the {backend.name} backend runs its own model code and log-probs")
    config = model.config.get_text_config()
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in _MASKABLE_ATTENTION:
        return SharedTokens(False, f"off: attention '{attention}' takes no arbitrary mask (sdpa and eager do)")
    if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or ()):
        return SharedTokens(False, "off: the model has sliding-window layers, which one shared mask cannot express")
    if getattr(config, "output_router_logits", False):
        return SharedTokens(False, "off: a mixture-of-experts router loss depends on the tokens in the batch")
    return SharedTokens(True, f"on: tokens several rows share are computed once ({attention} attention)")


def sandbox_layers() -> dict[str, str]:
    """The kernel layers a worker will confine itself with here; a missing one is a warning, once per run."""
    layers = available_layers()
    missing = [f"{name} ({state.removeprefix('unavailable: ')})" for name, state in layers.items()
               if state.startswith("unavailable")]  # fmt: skip
    if missing:
        logger.warning("sandbox: the kernel offers the verifier workers no %s; they run with the other layers "
                       "(parsers instead of eval, a fresh process per answer, limits, an audit hook): "
                       "docs/guarantees.md", " and no ".join(missing))  # fmt: skip
    return layers


def reference_record(config: PipelineConfig) -> dict[str, str]:
    """What GRPO's KL term anchors the policy to (``grpo_training.beta``), for summary.json."""
    if config.grpo_training.beta == 0:
        return {"model": "none", "reason": "grpo_training.beta is 0: no KL term"}
    if config.model.uses_lora:
        return {"model": "the policy GRPO starts from", "reason": "TRL copies the starting adapter (SFT's) into a "
                "frozen 'ref' adapter when it is given a PEFT model and beta > 0"}  # fmt: skip
    return {"model": "the policy GRPO starts from", "reason": "a frozen copy of the fine-tuned weights replaces "
            "the base model TRL would load from its path (the model before SFT)"}  # fmt: skip
