"""What differs between the libraries that load, adapt and train the model, as one object per backend.

The run picks a backend once (``backends.choose_backend``) and hands the object to everything whose behaviour
depends on it: the ``ModelManager`` (loading, saving, merged and GGUF export), the phases (the trainer's
activation checkpointing, what GRPO generates its rollouts with, the trainer a backend must get), the memory
estimate (how much of the GPU its vLLM engine takes, and whether that engine holds the training weights or a
second copy), the generation engines (whether the model carries an engine, whether its weights can be pushed
into one) and the process check (whether several processes may run it). A difference between backends is a
method here, never a comparison of names elsewhere.

What GRPO generates its completions with (``Backend.rollouts``):

| rollouts | meaning | whose engine |
| --- | --- | --- |
| ``generate`` | ``model.generate`` inside the trainer | none |
| ``model_engine`` | the vLLM engine the model carries (Unsloth's ``fast_inference``) | built with the model |
| ``trl_colocate`` | TRL's vLLM engine in this process (``vllm_mode: colocate``) | started by TRL's trainer |
| ``trl_server`` | a ``trl vllm-serve`` server (``vllm_mode: server``) | the server's |

The engines' life (start, sleep, weights, teardown) is in ``llm_finetuning.rollout``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..config import ModelConfig, PipelineConfig
from ..errors import ModelError
from ..runtime.hardware import Machine
from .hardware import gradient_checkpointing, optimizer

if TYPE_CHECKING:
    import torch

__all__ = ["Backend", "Rollouts"]

Rollouts = Literal["generate", "model_engine", "trl_colocate", "trl_server"]


class Backend(ABC):
    """One backend, chosen for one run; ``reason`` says why it was chosen (logged and in ``summary.json``), and
    ``machine`` is what the run found here (probed once, by whoever chose the backend): every decision of the
    backend that depends on the device reads it, never CUDA or vLLM again."""

    name: ClassVar[str]
    several_processes: ClassVar[bool] = True  # whether a multi-process launch may run it
    engine_holds_training_weights: ClassVar[bool]  # GRPO's engine shares the trained weights (else: a second copy)
    model_code_is_transformers: ClassVar[bool] = True  # attention and masks as transformers implements them

    def __init__(self, reason: str = "", machine: Machine | None = None) -> None:
        self.machine = machine or Machine.probe()
        self.reason = reason or self.asked_for()

    def asked_for(self) -> str:
        """The reason when the config names this backend."""
        return f"model.backend: {self.name} was asked for"

    @classmethod
    def import_problem(cls) -> str | None:
        """Why this backend's library cannot be imported here (None: it can)."""
        return None

    def prepare(self) -> None:
        """What must happen before trl/transformers are imported (nothing, unless the library patches them)."""

    def check_config(self, config: PipelineConfig) -> None:
        """Refuse, before any model loads, a config this backend's trainers would reject or silently override."""
        for phase in ("sft_training", "grpo_training"):
            optimizer(getattr(config, phase).optim, f"{phase}.optim")

    # Loading and saving

    @abstractmethod
    def load_trainable(self, config: PipelineConfig, model_path: str, dtype: torch.dtype) -> tuple[Any, Any]:
        """Base model in ``dtype`` (the run's precision) with LoRA adapters initialised from the run's seed (or all
        weights trainable), and its tokenizer."""

    @abstractmethod
    def load_inference(self, config: PipelineConfig, base_path: str, adapter_path: Path,
                       dtype: torch.dtype) -> tuple[Any, Any]:  # fmt: skip
        """Base model with a saved LoRA adapter applied (or a saved full model), and the tokenizer saved with it."""

    @abstractmethod
    def save_merged(self, model: Any, tokenizer: Any, model_config: ModelConfig, base_path: str,
                    staging: Path, dtype: torch.dtype) -> None:  # fmt: skip
        """Write LoRA merged into 16-bit base weights into ``staging`` (loadable by plain transformers)."""

    def save_gguf(self, model: Any, tokenizer: Any, output: Path, quantization: str) -> list[Path]:
        """GGUF files of the model, as the library reports writing them."""
        raise ModelError(
            f"--gguf needs the Unsloth backend (CUDA GPU and uv sync --extra gpu), but this run uses {self.name}; "
            "export --merged and convert it with llama.cpp's convert_hf_to_gguf.py"
        )

    # Training

    def trainer_checkpointing(self, model_config: ModelConfig, phase_setting: bool | None = None) -> bool:
        """Whether the trainer checkpoints activations in a phase whose own setting is ``phase_setting`` (the
        hardware rule, unless the library does it itself)."""
        return gradient_checkpointing(model_config, phase_setting)

    def checkpoint_activations(self, model: Any, on: bool) -> None:
        """Turn activation checkpointing on or off for the phase about to train (the trainer turns it on where
        its arguments say so, but never off: the model keeps what loading or the last phase set)."""
        if on:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        elif getattr(model, "is_gradient_checkpointing", False):
            model.gradient_checkpointing_disable()
        model.config.use_cache = not on  # the KV cache is useless while training and conflicts with checkpointing

    def check_trainer(self, trainer: Any) -> None:
        """Refuse a built trainer that is not the one this backend trains with."""

    @abstractmethod
    def choose_rollouts(self, config: PipelineConfig) -> tuple[Rollouts, str]:
        """What GRPO generates its completions with (table above), and why (logged, in ``summary.json``)."""

    def rollouts(self, config: PipelineConfig) -> Rollouts:
        return self.choose_rollouts(config)[0]

    # Generation and memory

    def model_engine(self, model: Any) -> Any:
        """The vLLM engine the loaded model carries, or None."""
        return None

    def vllm_refusal(self, model_config: ModelConfig) -> str | None:
        """Why this backend's weights cannot be pushed into a vLLM engine of the run (None: they can)."""
        return None

    def engine_wanted_on_cuda(self, config: PipelineConfig) -> bool:
        """For the memory estimate: whether GRPO's rollouts take a vLLM engine on a CUDA GPU with vLLM installed
        (``grpo_training.use_vllm``, the run's one engine choice: null takes it there)."""
        return config.grpo_training.vllm_allowed
