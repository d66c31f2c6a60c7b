"""Make TRL 1.15's fused LM head work on machines without a GPU.

Why this exists: the GPU stack (Unsloth 2026.10 + vLLM 0.31) pins TRL to <= 1.15, and we want one tested set
of versions on CPU and GPU. TRL 1.15's SFTTrainer and GRPOTrainer always compute per-token log-probabilities
through ``ChunkedLogProbFunction``, whose inner loop is a Triton kernel. On a machine with no GPU, Triton has
no active driver and training dies with "0 active drivers". TRL 1.16 fixed this by falling back to PyTorch;
we do the same, narrowly: when CUDA is unavailable, TRL's module-level reference is swapped for
``TorchChunkedLogProb``, which computes the same five outputs with plain PyTorch (and autograd for the
backward). On a GPU nothing is patched and TRL's kernel runs.

``install(cuda)`` is idempotent and called by the training phases before a trainer is built.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger(__name__)


class TorchChunkedLogProb:
    """Drop-in for ``trl.kernels.ChunkedLogProbFunction.apply`` with the same arguments and outputs.

    Returns ``(log_probs, entropy, log_sum_sq_probs, mean_logits, is_top1)``, each ``[N]`` or ``None`` when not
    requested in ``outputs``; the logits are transformed exactly as the kernel does: scale, soft-cap, temperature.
    As in the kernel, the logits are never kept: the forward works through the tokens in chunks and keeps only
    each token's log-normaliser, and the backward recomputes each chunk's logits; gradients flow through the
    log-probs and the entropy (the other outputs are figures, without gradients, as in the kernel).
    """

    @staticmethod
    def apply(
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        temperature: float,
        chunk_size: int,
        final_logit_softcapping: float | None = None,
        logit_scale: float = 1.0,
        outputs: tuple[str, ...] = ("log_probs",),
    ) -> tuple[torch.Tensor | None, ...]:
        del chunk_size  # the kernel's vocabulary tile; here whole rows of _TOKEN_CHUNK tokens
        head = _Head(temperature, final_logit_softcapping, logit_scale)
        log_probs, entropy, log_sum_sq, mean_logits, is_top1 = _RecomputedLogProbs.apply(
            hidden, weight, bias, targets, head, outputs
        )
        return (log_probs, entropy if "entropy" in outputs else None,
                log_sum_sq if "log_sum_sq_probs" in outputs else None,
                mean_logits if "mean_logits" in outputs else None, is_top1 if "is_top1" in outputs else None)  # fmt: skip


_TOKEN_CHUNK = 512  # tokens whose logits exist at once: 512 x a 49k vocabulary is 100 MB in fp32


class _Head:
    """The kernel's transform of the LM head's output: scale, soft-cap, temperature; and its derivative."""

    def __init__(self, temperature: float, softcap: float | None, scale: float) -> None:
        self.temperature, self.softcap, self.scale = temperature, softcap, scale

    def logits(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """(logits in fp32, the soft-cap's tanh or None, the projection's dtype)."""
        raw = torch.nn.functional.linear(hidden, weight, bias)
        logits = raw.float() * self.scale
        capped = None
        if self.softcap is not None:
            capped = torch.tanh(logits / self.softcap)
            logits = self.softcap * capped
        return logits / self.temperature, capped, raw.dtype

    def chain(self, grad_logits: torch.Tensor, capped: torch.Tensor | None) -> torch.Tensor:
        """The gradient with respect to the projection's output, from the one with respect to the logits."""
        grad = grad_logits * (self.scale / self.temperature)
        return grad if capped is None else grad * (1 - capped * capped)


class _RecomputedLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                targets: torch.Tensor, head: _Head, outputs: tuple[str, ...]) -> tuple[torch.Tensor, ...]:  # fmt: skip
        parts: dict[str, list[torch.Tensor]] = {name: [] for name in ("log_z", "log_probs", "entropy", "sq", "mean",
                                                                      "top1")}  # fmt: skip
        for start in range(0, hidden.size(0), _TOKEN_CHUNK):
            chunk = slice(start, start + _TOKEN_CHUNK)
            logits, _, ctx.compute_dtype = head.logits(hidden[chunk], weight, bias)
            log_z = torch.logsumexp(logits, dim=-1)
            parts["log_z"].append(log_z)
            parts["log_probs"].append(logits.gather(-1, targets[chunk].unsqueeze(-1)).squeeze(-1) - log_z)
            needs_probs = "entropy" in outputs or "log_sum_sq_probs" in outputs
            probs = torch.exp(logits - log_z.unsqueeze(-1)) if needs_probs else None
            if "entropy" in outputs:
                parts["entropy"].append(log_z - torch.linalg.vecdot(probs, logits))
            if "log_sum_sq_probs" in outputs:
                parts["sq"].append(torch.log(torch.linalg.vecdot(probs, probs)))
            if "mean_logits" in outputs:
                parts["mean"].append(logits.mean(-1))
            if "is_top1" in outputs:  # argmax returns the first maximum, matching the kernel's tie rule
                parts["top1"].append(logits.argmax(-1) == targets[chunk])
        joined = {name: torch.cat(values) if values else None for name, values in parts.items()}
        empty = hidden.new_zeros(hidden.size(0), dtype=torch.float32)
        entropy = joined["entropy"] if joined["entropy"] is not None else empty
        ctx.head = head
        ctx.set_materialize_grads(False)  # an output the loss does not use comes back as None: no work for it
        ctx.save_for_backward(hidden, weight, bias, targets, joined["log_z"], entropy)
        ctx.mark_non_differentiable(*(t for t in (joined["sq"], joined["mean"], joined["top1"]) if t is not None))
        return joined["log_probs"], entropy, joined["sq"], joined["mean"], joined["top1"]

    @staticmethod
    def backward(ctx: Any, grad_log_probs: torch.Tensor | None, grad_entropy: torch.Tensor | None,
                 *_: Any) -> tuple[torch.Tensor | None, ...]:  # fmt: skip
        hidden, weight, bias, targets, log_z, entropy = ctx.saved_tensors
        wants_hidden, wants_weight, wants_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.zeros_like(hidden) if wants_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if wants_weight else None
        grad_bias = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if wants_bias else None
        dtype = ctx.compute_dtype  # the forward's projection ran under autocast; the backward does not
        weight_as_computed = weight.to(dtype)
        bias_as_computed = None if bias is None else bias.to(dtype)
        for start in range(0, hidden.size(0), _TOKEN_CHUNK):
            chunk = slice(start, start + _TOKEN_CHUNK)
            logits, capped, _ = ctx.head.logits(hidden[chunk].to(dtype), weight_as_computed, bias_as_computed)
            log_p = logits - log_z[chunk].unsqueeze(-1)
            probs = torch.exp(log_p)
            grad = torch.zeros_like(logits)
            if grad_log_probs is not None:  # d log p_t / d z_j = [j = t] - p_j
                g = grad_log_probs[chunk].float()
                grad -= probs * g.unsqueeze(-1)
                grad.scatter_add_(-1, targets[chunk].unsqueeze(-1), g.unsqueeze(-1))
            if grad_entropy is not None:  # d H / d z_j = -p_j (log p_j + H)
                grad -= probs * (log_p + entropy[chunk].unsqueeze(-1)) * grad_entropy[chunk].float().unsqueeze(-1)
            grad = ctx.head.chain(grad, capped).to(dtype)
            if wants_hidden:
                grad_hidden[chunk] = (grad @ weight_as_computed).to(hidden.dtype)
            if wants_weight:
                grad_weight += (grad.t() @ hidden[chunk].to(dtype)).float()
            if wants_bias:
                grad_bias += grad.float().sum(0)
        return (grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype),
                None if grad_bias is None else grad_bias.to(bias.dtype), None, None, None)  # fmt: skip


def install(cuda: bool) -> bool:
    """Patch TRL's fused LM head where the run trains on a CPU (``RunPlan.cuda`` false); return True when the
    fallback is active."""
    if cuda:
        return False
    import trl.trainer.utils as trl_utils

    if trl_utils._ChunkedLogProbFunction is not TorchChunkedLogProb:
        trl_utils._ChunkedLogProbFunction = TorchChunkedLogProb
        logger.debug("No CUDA: TRL's Triton log-prob kernel replaced by the PyTorch fallback")
    return True
