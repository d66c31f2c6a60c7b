"""The CPU fallback for TRL 1.15's fused log-prob kernel matches a plain log-softmax, values and gradients."""

import pytest
import torch

from llm_finetuning.training.trl_compat import TorchChunkedLogProb, install

OUTPUTS = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


def reference(hidden, weight, bias, targets, temperature, softcap, scale):
    logits = (hidden @ weight.T + bias) * scale
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    log_p = torch.log_softmax(logits / temperature, dim=-1)
    p = log_p.exp()
    return (
        log_p.gather(-1, targets[:, None]).squeeze(-1),
        -(p * log_p).sum(-1),
        torch.log((p * p).sum(-1)),
        (logits / temperature).mean(-1),
        (logits / temperature).argmax(-1) == targets,
    )


@pytest.mark.parametrize(("temperature", "softcap", "scale"), [(1.0, None, 1.0), (0.7, 30.0, 0.5)])
def test_matches_reference_values_and_gradients(temperature, softcap, scale):
    torch.manual_seed(0)
    hidden = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(11, 8, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(11, dtype=torch.float64)
    targets = torch.randint(0, 11, (6,))
    ours = TorchChunkedLogProb.apply(hidden, weight, bias, targets, temperature, 4, softcap, scale, OUTPUTS)
    expected = reference(hidden, weight, bias, targets, temperature, softcap, scale)
    for got, want in zip(ours, expected, strict=True):
        assert torch.allclose(got.double(), want.double(), atol=1e-6)
    grad_ours = torch.autograd.grad(ours[0].sum(), (hidden, weight))
    grad_ref = torch.autograd.grad(expected[0].sum(), (hidden, weight))
    for got, want in zip(grad_ours, grad_ref, strict=True):
        assert torch.allclose(got, want, atol=1e-8)


def test_unrequested_outputs_are_none():
    hidden, weight, targets = torch.randn(3, 4), torch.randn(5, 4), torch.tensor([0, 1, 2])
    log_probs, entropy, log_sum_sq, mean_logits, is_top1 = TorchChunkedLogProb.apply(
        hidden, weight, None, targets, 1.0, 4)
    assert log_probs.shape == (3,)
    assert entropy is None and log_sum_sq is None and mean_logits is None and is_top1 is None


def test_install_patches_trl_on_cpu_and_leaves_it_alone_on_cuda(monkeypatch):
    import trl.trainer.utils as trl_utils

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", "trl's kernel")
    assert install(cuda=True) is False and trl_utils._ChunkedLogProbFunction == "trl's kernel"
    assert install(cuda=False) is True and trl_utils._ChunkedLogProbFunction is TorchChunkedLogProb


@pytest.mark.parametrize(("temperature", "softcap", "scale"), [(1.0, None, 1.0), (0.7, 30.0, 0.5)])
def test_entropy_gradients_over_several_token_chunks_match_the_reference(monkeypatch, temperature, softcap, scale):
    from llm_finetuning.training import trl_compat

    monkeypatch.setattr(trl_compat, "_TOKEN_CHUNK", 4)  # 10 tokens: three chunks
    torch.manual_seed(1)
    hidden = torch.randn(10, 8, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 8, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(13, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 13, (10,))
    ours = TorchChunkedLogProb.apply(hidden, weight, bias, targets, temperature, 4, softcap, scale, OUTPUTS)
    expected = reference(hidden, weight, bias, targets, temperature, softcap, scale)
    weights = torch.randn(10, dtype=torch.float64)
    for got, want in zip(ours, expected, strict=True):
        assert torch.allclose(got.double(), want.double(), atol=1e-6)
    grad_ours = torch.autograd.grad((ours[0] * weights).sum() + 0.3 * ours[1].sum(), (hidden, weight, bias))
    grad_ref = torch.autograd.grad((expected[0] * weights).sum() + 0.3 * expected[1].sum(), (hidden, weight, bias))
    for got, want in zip(grad_ours, grad_ref, strict=True):
        assert torch.allclose(got.double(), want, atol=1e-6)


def test_under_bf16_autocast_the_backward_recomputes_in_the_forwards_precision():
    torch.manual_seed(2)
    hidden = torch.randn(6, 8, requires_grad=True)  # fp32 activations, as autocast leaves some
    weight = torch.randn(11, 8, dtype=torch.bfloat16)  # the frozen head of a bf16 model
    targets = torch.randint(0, 11, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        log_probs = TorchChunkedLogProb.apply(hidden, weight, None, targets, 1.0, 4)[0]
        plain = torch.log_softmax(torch.nn.functional.linear(hidden, weight).float(), -1)
        want = plain.gather(-1, targets[:, None]).squeeze(-1)
    assert torch.allclose(log_probs, want, atol=1e-6)
    (got_grad,) = torch.autograd.grad(log_probs.sum(), hidden)
    (want_grad,) = torch.autograd.grad(want.sum(), hidden)
    assert got_grad.dtype == torch.float32 and torch.allclose(got_grad, want_grad, atol=1e-2)
