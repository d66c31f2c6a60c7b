"""Make TRL 1.15's fused LM head work on machines without a GPU.

Why this exists: the GPU stack (Unsloth 2026.10 + vLLM 0.31) pins TRL to <= 1.15, and we want one tested set
of versions on CPU and GPU. TRL 1.15's SFTTrainer and GRPOTrainer always compute per-token log-probabilities
through ``ChunkedLogProbFunction``, whose inner loop is a Triton kernel. On a machine with no GPU, Triton has
no active driver and training dies with "0 active drivers". TRL 1.16 fixed this by falling back to PyTorch;
we do the same, narrowly: when CUDA is unavailable, TRL's module-level reference is swapped for
``TorchChunkedLogProb``, which computes the same five outputs with plain PyTorch (and autograd for the
backward). On a GPU nothing is patched and TRL's kernel runs.

``install()`` is idempotent and called by the training phases before a trainer is built.
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)


class TorchChunkedLogProb:
    """Drop-in for ``trl.kernels.ChunkedLogProbFunction.apply`` with the same arguments and outputs.

    Returns ``(log_probs, entropy, log_sum_sq_probs, mean_logits, is_top1)``, each ``[N]`` or ``None`` when not
    requested in ``outputs``; the logits are transformed exactly as the kernel does: scale, soft-cap, temperature.
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
        del chunk_size  # the CPU path materialises the logits; the models that train on CPU are small
        logits = torch.nn.functional.linear(hidden, weight, bias).float() * logit_scale
        if final_logit_softcapping is not None:
            logits = final_logit_softcapping * torch.tanh(logits / final_logit_softcapping)
        logits = logits / temperature
        log_z = torch.logsumexp(logits, dim=-1)
        target_logit = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        log_probs = target_logit - log_z
        log_p = logits - log_z.unsqueeze(-1)
        entropy = -(log_p.exp() * log_p).sum(-1) if "entropy" in outputs else None
        log_sum_sq = torch.logsumexp(2 * log_p, dim=-1) if "log_sum_sq_probs" in outputs else None
        mean_logits = logits.mean(-1) if "mean_logits" in outputs else None
        # argmax returns the first maximum, matching the kernel's tie rule
        is_top1 = (logits.argmax(-1) == targets) if "is_top1" in outputs else None
        return log_probs, entropy, log_sum_sq, mean_logits, is_top1


def install() -> bool:
    """Patch TRL's fused LM head for CPU-only machines; return True when the fallback is active."""
    if torch.cuda.is_available():
        return False
    import trl.trainer.utils as trl_utils

    if trl_utils._ChunkedLogProbFunction is not TorchChunkedLogProb:
        trl_utils._ChunkedLogProbFunction = TorchChunkedLogProb
        logger.debug("No CUDA: TRL's Triton log-prob kernel replaced by the PyTorch fallback")
    return True
