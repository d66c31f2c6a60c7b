"""The training model's current weights into a running vLLM engine, so it generates with what is being trained.

``model_weights`` names every weight as a checkpoint names it (what vLLM's ``load_weights`` reads) and folds
LoRA into its base weight *without touching the model* (base + peft's ``get_delta_weight``): evaluating never
perturbs training, and an engine needs no LoRA support (vLLM's LoRA path is several times slower on a CPU).
TRL's own sync merges the adapters into the base weights and unmerges them, which in 16-bit weights is not a
round trip (measured in bf16: after 10 syncs all 210 of SmolLM2's frozen projection weights had moved, by up to
2.3e-2), so the engines the run owns are synced from ``model_weights`` instead.
``push_weights`` loads them into the engine:

- on a GPU, as TRL's colocated sync does: the engine's ``model.load_weights``, then a prefix-cache reset;
- on vLLM's CPU build that path fails (its linear layers repack their weights after loading and keep an empty
  Parameter without a ``weight_loader``), so the weights go through vLLM's in-place ``reload_weights``, which
  repacks them again; a tied ``lm_head`` keeps its own packed copy of the embedding, so it is repacked too.

    >>> push_weights(llm, model_weights(model))   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

__all__ = ["checkpoint_name", "forget_reload_state", "model_weights", "push_weights", "weights_version"]


def checkpoint_name(name: str) -> str:
    """A (peft) parameter name as the base checkpoint spells it: no ``base_model.model.`` or wrapper parts."""
    name = name.removeprefix("base_model.model.").replace(".base_layer", "")
    return name.replace(".modules_to_save.default", "")


def model_weights(model: Any, changing_only: bool = False) -> Iterator[tuple[str, torch.Tensor]]:
    """``(checkpoint name, tensor)`` for every base weight, LoRA folded in; adapter tensors are not yielded.

    ``changing_only``: only the weights training can change (those under a LoRA adapter, and trainable ones):
    what an engine that already holds the model needs again after an optimizer step (under LoRA the embedding and
    the norms never change; measured on SmolLM2-135M, the same output at 0.30 s a push instead of 0.36 s).
    """
    deltas = _lora_deltas(model)
    for name, parameter in model.named_parameters():
        if "lora_" in name or ".original_module." in name:
            continue
        if changing_only and name not in deltas and not parameter.requires_grad:
            continue
        weight = parameter.detach()
        if name in deltas:
            weight = (weight.float() + deltas[name].float()).to(weight.dtype)
        yield checkpoint_name(name), weight


def _lora_deltas(model: Any) -> dict[str, torch.Tensor]:
    """``{base weight's parameter name: W_B @ W_A * scale}`` for every active, unmerged LoRA layer."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return {}
    deltas: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for module_name, module in model.named_modules():
            if not isinstance(module, LoraLayer) or module.merged:
                continue
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    key = f"{module_name}.base_layer.weight"
                    delta = module.get_delta_weight(adapter)
                    deltas[key] = deltas[key] + delta if key in deltas else delta
    return deltas


def weights_version(model: Any) -> tuple[float, ...]:
    """Changes whenever a trainable weight changes (an optimizer step, a loaded adapter): when to push again.

    Read from the values, not from the tensors' in-place version counters: fused AdamW (the optimizer on a
    CPU) updates the weights without bumping them, so an engine keyed on them kept generating from the
    weights before training. One float64 sum per tensor (no copy), one device sync.
    """
    trainable = [p.detach() for p in model.parameters() if p.requires_grad]
    if not trainable:
        return (float(id(model)),)
    with torch.no_grad():
        return tuple(torch.stack([p.sum(dtype=torch.float64) for p in trainable]).tolist())


def push_weights(llm: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load ``weights`` (checkpoint names) into the running engine ``llm`` and drop its cached prefixes."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        llm.collective_rpc(
            # streamed (the engine runs in this process): one folded tensor at a time, never all of them at once
            "reload_weights", kwargs={"weights_iterator": iter(weights), "is_checkpoint_format": True}
        )
        llm.apply_model(_repack_output_layer)
    else:
        llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(weights)
    llm.reset_prefix_cache()


def _repack_output_layer(model: Any) -> None:
    """vLLM's CPU build packs ``lm_head`` from the (tied) embedding once at load; pack it from the new weights."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    head = getattr(model, "lm_head", None)
    if head is not None and getattr(head, "weight", None) is not None:
        dispatch_cpu_unquantized_gemm(head, remove_weight=False)


def forget_reload_state(model: Any) -> None:
    """Drop what vLLM's in-place reload (the CPU branch of ``push_weights``) keeps about ``model``'s layers.

    vLLM keeps that state per layer in a global ``WeakKeyDictionary``, but the entry of a tied output layer
    holds the embedding Parameter, whose ``weight_loader`` is bound to the layer: the entry keeps its own key
    alive, and the layer and its weights outlive the engine (measured: the embedding, every engine). Called
    when an engine shuts down.
    """
    try:
        from vllm.model_executor.model_loader.reload.layerwise import LAYERWISE_INFO
    except ImportError:  # a vLLM without in-place reload keeps nothing
        return
    for module in model.modules():
        LAYERWISE_INFO.pop(module, None)
