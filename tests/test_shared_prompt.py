"""GRPO's log-probs with each group's prompt computed once give the full pass's log-probs and gradients.

The layout on literal batches; the values against TRL's own pass through a real TRL GRPOTrainer on the small tiny
model (sdpa and eager attention, fp32 and bf16, prompts of different lengths, left padding, completions with
holes in their mask, partial groups as a micro-batch under gradient accumulation holds them, TRL's row chunks);
two GRPO runs of the pipeline with and without it. The same comparison on SmolLM2 is in test_real_model.py.

Tolerances: in fp32 the two passes differ only by the order of floating-point sums (log-probs within 1e-5,
gradients within 1e-5 relative; 1e-4 on SmolLM2's 30 layers). In bf16 both round differently, so the shared pass is held to the plain pass's
own accuracy: its distance to the fp32 values is at most 1.25 times the plain bf16 pass's distance.
"""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT, real_model_marks

from llm_finetuning.model import get_backend
from llm_finetuning.session.plan import shared_tokens
from llm_finetuning.training import trl_compat
from llm_finetuning.training.shared_prompt import common_prefix, pack_groups, pack_prefix, unpack

PROMPT, COMPLETION = 12, 9


def literal_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts (lengths 3 and 2, left-padded to 4); three rows, the first and third sharing a prompt."""
    ids = torch.tensor([[0, 11, 12, 13, 21, 22, 0],
                        [0, 0, 14, 15, 23, 0, 0],
                        [0, 11, 12, 13, 24, 25, 26]])  # fmt: skip
    mask = torch.tensor([[0, 1, 1, 1, 1, 1, 0],
                         [0, 0, 1, 1, 1, 0, 0],
                         [0, 1, 1, 1, 1, 0, 1]])  # fmt: skip
    return ids, mask


def test_rows_sharing_a_prompt_become_one_packed_row_with_the_prompt_once():
    ids, mask = literal_batch()
    packed = pack_groups(ids, mask, completion_length=3)
    assert packed.input_ids.shape[0] == 2  # two distinct prompts
    row = packed.input_ids.tolist()[[11 in r for r in packed.input_ids.tolist()].index(True)]
    # prompt without its last token; then per completion: the last prompt token and the completion but its last
    assert row[:7] == [11, 12] + [13, 21] + [13, 24, 25]
    other = packed.input_ids.tolist()[[14 in r for r in packed.input_ids.tolist()].index(True)]
    assert other[:2] == [14, 15]


def test_positions_labels_and_mask_follow_the_padded_batch():
    ids, mask = literal_batch()
    packed = pack_groups(ids, mask, completion_length=3)
    index = [11 in r for r in packed.input_ids.tolist()].index(True)
    positions, labels = packed.position_ids[index].tolist(), packed.shift_labels[index].tolist()
    allowed = packed.attention_mask[index, 0]
    # columns 1, 2 of the prompt; segment 1 (row 0): column 3 then 4; segment 2 (row 2): 3, 4, 5
    assert positions[:7] == [1, 2, 3, 4, 3, 4, 5]
    assert labels[:7] == [-100, -100, 21, 22, 24, -100, 26]  # row 2's token 25 is masked: not scored
    assert allowed[6].tolist()[:7] == [True, True, False, False, True, True, False]  # not row 0, not the hole
    assert not allowed[2, 4] and allowed[4, 0] and allowed[4, 4]  # causal inside a segment, the prompt for all
    # each completion token maps back to the packed position that scores it, masked tokens to nothing
    assert packed.source[0].tolist() == [index * packed.input_ids.size(1) + 2, index * packed.input_ids.size(1) + 3, -1]
    assert packed.source[2, 1].item() == -1 and packed.source[2, 2].item() >= 0


def test_unpack_puts_zeros_where_nothing_was_scored():
    values = torch.arange(6.0).reshape(2, 3)
    source = torch.tensor([[0, 4, -1], [-1, -1, 5]])
    assert unpack(values, source).tolist() == [[0.0, 4.0, 0.0], [0.0, 0.0, 5.0]]


@pytest.mark.parametrize(("asked", "backend", "attention", "layers", "on", "reason"), [
    (True, "hf", "sdpa", None, True, "on: tokens several rows share are computed once (sdpa attention)"),
    (True, "hf", "eager", ["full_attention"], True, "eager attention"),
    (False, "hf", "sdpa", None, False, "off, as configured"),
    (True, "unsloth", "sdpa", None, False, "the unsloth backend runs its own model code and log-probs"),
    (True, "hf", "flash_attention_2", None, False, "attention 'flash_attention_2' takes no arbitrary mask"),
    (True, "hf", "sdpa", ["sliding_attention", "full_attention"], False, "sliding-window layers"),
])  # fmt: skip
def test_the_decision_says_why(asked, backend, attention, layers, on, reason):
    config = SimpleNamespace(_attn_implementation=attention, layer_types=layers, output_router_logits=False)
    config.get_text_config = lambda: config
    decision = shared_tokens(asked, get_backend(backend), SimpleNamespace(config=config))
    assert decision.on is on and reason in decision.reason
    assert decision.record() == {"on": on, "reason": decision.reason}


def grpo_trainer(base, tmp_path, attention: str, dtype: torch.dtype):
    """Our GRPO trainer (TRL's with the shared prompt on) over a LoRA-wrapped model at ``base``, LoRA B non-zero so
    the adapter matters."""
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.training.grpo_trainer import StepRecipe, grpo_trainer_class

    trl_compat.install(cuda=False)  # these trainers run on the CPU (use_cpu=True) on any machine, a GPU one too
    model = AutoModelForCausalLM.from_pretrained(base, attn_implementation=attention, dtype=dtype)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"],
                                             lora_dropout=0.0))  # fmt: skip
    generator = torch.Generator().manual_seed(1)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            parameter.data = torch.randn(parameter.shape, generator=generator).to(parameter.dtype) * 0.02
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=dtype == torch.bfloat16,
                      per_device_train_batch_size=8, num_generations=4, max_completion_length=8, report_to=[])  # fmt: skip
    return grpo_trainer_class(GRPOTrainer)(
        model=model, args=args, reward_funcs=lambda completions, **_: [0.0] * len(completions),
        train_dataset=Dataset.from_dict({"prompt": ["x"] * 8}),
        recipe=StepRecipe(is_correct=lambda text, row: False, shared_prompt=True),
    )


def varied_batch(vocab: int, prompts: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Three prompts of lengths 12, 7 and 10 (left-padded; random tokens unless given); ten rows in mixed order,
    groups of 4, 3 and 3 as a gradient-accumulation slice holds them; completions of 0 to 9 tokens, some with a
    masked token inside."""
    generator = torch.Generator().manual_seed(0)
    prompts = prompts or [torch.randint(5, vocab, (n,), generator=generator) for n in (12, 7, 10)]
    owners = [0, 1, 2, 0, 1, 0, 2, 1, 0, 2]
    ids = torch.zeros(len(owners), PROMPT + COMPLETION, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, owner in enumerate(owners):
        prompt = prompts[owner]
        ids[row, PROMPT - len(prompt) : PROMPT], mask[row, PROMPT - len(prompt) : PROMPT] = prompt, 1
        length = int(torch.randint(0, COMPLETION + 1, (1,), generator=generator))
        ids[row, PROMPT : PROMPT + length] = torch.randint(5, vocab, (length,), generator=generator)
        mask[row, PROMPT : PROMPT + length] = 1
        if length > 4 and row % 3 == 0:
            mask[row, PROMPT + 2] = 0
    return ids, mask


def log_probs_and_gradients(trainer, pass_, ids, mask, batch_size=None, autocast=True):
    model = trainer.model
    model.zero_grad()
    weights = torch.randn(ids.size(0), COMPLETION, generator=torch.Generator().manual_seed(2))
    context = contextlib.nullcontext() if autocast else _without_autocast(trainer)
    with context:
        logps, entropies, _ = pass_(model, ids, mask, COMPLETION, batch_size=batch_size, compute_entropy=True)
    (logps * weights).sum().backward()
    gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return logps.detach(), entropies.detach(), gradients


@contextlib.contextmanager
def _without_autocast(trainer):
    trainer.accelerator.autocast, kept = contextlib.nullcontext, trainer.accelerator.autocast
    try:
        yield
    finally:
        trainer.accelerator.autocast = kept


def plain_and_shared(trainer, ids, mask, batch_size=None, autocast=True):
    from trl import GRPOTrainer

    def plain(*args, **kwargs):
        return GRPOTrainer._get_per_token_logps_and_entropies(trainer, *args, **kwargs)

    shared = trainer._get_per_token_logps_and_entropies
    return (log_probs_and_gradients(trainer, plain, ids, mask, batch_size, autocast),
            log_probs_and_gradients(trainer, shared, ids, mask, batch_size, autocast))  # fmt: skip


def largest_relative_gap(first: dict, second: dict) -> float:
    assert first.keys() == second.keys() and first
    return max(((first[name] - second[name]).norm() / first[name].norm()).item() for name in first)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("batch_size", [None, 4])  # 4: TRL's row chunks, here whole groups of about 4 rows
def test_fp32_log_probs_entropies_and_lora_gradients_equal_the_full_pass(tiny_base, tmp_path, attention, batch_size):
    fp32_equals_the_full_pass(tiny_base, tmp_path, attention, batch_size)


def fp32_equals_the_full_pass(base, tmp_path, attention, batch_size=None, prompts=None, tolerance=1e-5):
    trainer = grpo_trainer(base, tmp_path, attention, torch.float32)
    ids, mask = varied_batch(trainer.model.config.vocab_size, prompts)
    plain, shared = plain_and_shared(trainer, ids, mask, batch_size)
    scored = mask[:, PROMPT:].bool()
    assert (plain[0][scored] - shared[0][scored]).abs().max() < tolerance
    assert (plain[1][scored] - shared[1][scored]).abs().max() < tolerance
    assert shared[0][~scored].abs().max() == 0 and plain[0][~scored].abs().max() == 0
    assert largest_relative_gap(plain[2], shared[2]) < tolerance


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_bf16_shared_pass_is_as_close_to_fp32_as_the_plain_bf16_pass(tiny_base, tmp_path, attention):
    bf16_matches_fp32_as_the_plain_pass_does(tiny_base, tmp_path, attention)


def bf16_matches_fp32_as_the_plain_pass_does(base, tmp_path, attention, prompts=None):
    exact = grpo_trainer(base, tmp_path / "fp32", attention, torch.float32)
    ids, mask = varied_batch(exact.model.config.vocab_size, prompts)
    reference, _ = plain_and_shared(exact, ids, mask, autocast=False)
    trainer = grpo_trainer(base, tmp_path / "bf16", attention, torch.bfloat16)
    plain, shared = plain_and_shared(trainer, ids, mask)
    scored = mask[:, PROMPT:].bool()

    def distance(result):
        return (result[0][scored] - reference[0][scored]).abs().mean().item()

    assert distance(shared) <= 1.25 * distance(plain) + 1e-6
    plain_gap, shared_gap = largest_relative_gap(reference[2], plain[2]), largest_relative_gap(reference[2], shared[2])
    assert shared_gap <= 1.25 * plain_gap + 1e-6


def test_the_loss_pass_takes_the_importance_ratio_from_the_shared_pass(tiny_base, tmp_path, monkeypatch):
    """Under the correction computed in the loss pass (as on vLLM rollouts), the ratio comes from the log-probs the
    loss pass computed (here the shared pass's), once, with TRL's formula; a no-grad pass adds none."""
    from trl import GRPOTrainer

    from llm_finetuning.training.importance import importance_ratio

    trainer = grpo_trainer(tiny_base, tmp_path, "sdpa", torch.float32)
    trainer._ratio_in_loss = True  # what importance.applies decides on vLLM rollouts with the correction on
    trainer.model.train()
    ids, mask = varied_batch(trainer.model.config.vocab_size)
    sampled = torch.full((ids.size(0), COMPLETION), -2.0)
    inputs = {"completion_mask": mask[:, PROMPT:], "sampling_per_token_logps": sampled}
    passes = []

    def trls_loss(self, model, inputs):  # what TRL's _compute_loss does first: the policy's log-probs
        passes.append(self._get_per_token_logps_and_entropies(model, ids, mask, COMPLETION)[0])
        return inputs.get("importance_sampling_ratio")

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", trls_loss)
    with torch.no_grad():
        assert trainer._compute_loss(trainer.model, inputs) is None  # no grad: TRL's no-grad passes, no ratio
    ratio = trainer._compute_loss(trainer.model, inputs)
    assert ratio is not None and ratio is inputs["importance_sampling_ratio"]
    expected = importance_ratio(passes[-1].detach(), sampled, inputs["completion_mask"],
                                trainer.vllm_importance_sampling_mode, trainer.vllm_importance_sampling_clip_min,
                                trainer.vllm_importance_sampling_clip_max)  # fmt: skip
    assert torch.equal(ratio, expected) and not torch.equal(ratio, torch.ones_like(ratio))
    plain = GRPOTrainer._get_per_token_logps_and_entropies(trainer, trainer.model, ids, mask, COMPLETION)[0]
    scored = mask[:, PROMPT:].bool()
    assert (passes[-1][scored] - plain[scored]).abs().max() < 1e-5  # the shared pass's log-probs, not TRL's
    assert set(trainer._metrics["train"]) >= {"sampling/importance_sampling_ratio/mean",
                                              "sampling/sampling_logp_difference/max"}  # fmt: skip


@pytest.mark.slow
def test_grpo_trains_the_same_with_and_without_the_shared_prompt(tmp_path, tiny_config):
    from safetensors.torch import load_file

    from llm_finetuning.pipeline import RunOptions, run

    runs = {}
    for shared in (True, False):
        config = tiny_config("model.dtype=float32", "grpo_training.max_steps=2",
                             "grpo_training.per_device_train_batch_size=4", "grpo_training.gradient_accumulation_steps=2",
                             "grpo_training.num_generations=4", "grpo_training.max_completion_length=12",
                             "grpo_training.beta=0.04", "grpo_training.logging_steps=1", "evaluation.enabled=false",
                             f"grpo_training.shared_prompt={str(shared).lower()}", output_dir=tmp_path / str(shared))  # fmt: skip
        summary = run(config, RunOptions(skip_sft=True))
        assert summary["shared_prompt"]["on"] is shared
        records = [json.loads(line) for line in (tmp_path / str(shared) / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in records if r.get("phase") == "grpo" and "loss" in r]
        weights = load_file(tmp_path / str(shared) / "grpo_saved_lora" / "model.safetensors")  # full fine-tuning
        runs[shared] = steps, weights
    (on_steps, on_adapter), (off_steps, off_adapter) = runs[True], runs[False]
    assert len(on_steps) == len(off_steps) == 2
    for on, off in zip(on_steps, off_steps, strict=True):
        assert on["reward"] == off["reward"]  # the same rollouts
        assert on["grad_norm"] > 0 and on["grad_norm"] == pytest.approx(off["grad_norm"], rel=1e-4)
        assert on["kl"] == pytest.approx(off["kl"], abs=1e-6)  # the reference (a frozen copy) shares prompts too
    assert max((on_adapter[k] - off_adapter[k]).abs().max().item() for k in on_adapter) < 1e-6


def smollm2_prompts() -> tuple[str, list[torch.Tensor]]:
    """SmolLM2's path and three of its real prompts (our chat template), cut to the test's prompt width."""
    from transformers import AutoTokenizer

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.model.sources import base_model_path
    from llm_finetuning.model.template import apply_chat_template_to

    config = PipelineConfig.from_yaml(ROOT / "configs" / "smollm2.yaml")
    path = str(base_model_path(config))
    tokenizer = apply_chat_template_to(AutoTokenizer.from_pretrained(path), config.prompt)
    prompts = []
    for question, length in (("What is 6 - 0 + 5?", 12), ("Calculate 61 + 22.", 7), ("What is 9 + 14 - 3?", 10)):
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True)  # fmt: skip
        prompts.append(torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"][-length:]))
    return path, prompts


@pytest.mark.parametrize("attention", [pytest.param(name, marks=real_model_marks()) for name in ("sdpa", "eager")])
def test_on_smollm2_fp32_equals_and_bf16_is_as_close_as_the_plain_pass(tmp_path, attention):
    path, prompts = smollm2_prompts()
    fp32_equals_the_full_pass(path, tmp_path / "fp32", attention, prompts=prompts, tolerance=1e-4)
    bf16_matches_fp32_as_the_plain_pass_does(path, tmp_path / "bf16", attention, prompts=prompts)


def test_the_common_prefix_stops_at_the_first_difference_padding_or_label():
    ids = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 3, 0], [5, 6, 7, 8, 2]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    unscored = torch.full_like(ids, -100)
    assert common_prefix(ids, mask, unscored) == 3  # column 3 differs in row 1
    labels = unscored.clone()
    labels[0, 2] = 7
    assert common_prefix(ids, mask, labels) == 2  # a scored token is never inside the shared part


def test_a_prefix_packed_batch_has_the_prefix_once_and_no_padding():
    ids = torch.tensor([[5, 6, 7, 21, 22, 0], [5, 6, 7, 31, 32, 33]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    labels = torch.tensor([[-100, -100, -100, 21, 22, -100], [-100, -100, -100, 31, 32, 33]])
    packed = pack_prefix(ids, mask, labels, common_prefix(ids, mask, labels))
    assert packed.input_ids.tolist() == [[5, 6, 7, 21, 7, 31, 32]]  # prefix minus its last token, then each rest
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 2, 3, 4]]
    assert packed.shift_labels.tolist() == [[-100, -100, 21, 22, 31, 32, 33]]
    assert packed.source.tolist() == [[2, 3, -1], [4, 5, 6]]  # columns 3, 4, 5 of each row


def sft_trainer_and_batch(tiny_base, tiny_tokenizer, tmp_path):
    """A real TRL SFTTrainer on the LoRA-wrapped small tiny model, and one collated batch of our conversations."""
    from datasets import Dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    from llm_finetuning.config import PromptConfig
    from llm_finetuning.data.processor import conversation
    from llm_finetuning.training.sft import sft_trainer_class

    trl_compat.install(cuda=False)  # these trainers run on the CPU (use_cpu=True) on any machine, a GPU one too
    system = PromptConfig().system_prompt
    rows = [(f"What is {a} + {b}?", f"{a} + {b} = {a + b}" + " ok" * (a % 4)) for a, b in ((3, 4), (12, 9), (7, 30))]
    data = Dataset.from_dict({"prompt": [conversation(system, q) for q, _ in rows],
                              "completion": [[{"role": "assistant", "content": c}] for _, c in rows]})  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.0))
    generator = torch.Generator().manual_seed(3)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            parameter.data = torch.randn(parameter.shape, generator=generator) * 0.02
    args = SFTConfig(output_dir=str(tmp_path / "sft"), use_cpu=True, bf16=False, per_device_train_batch_size=3,
                     report_to=[], max_length=512)  # fmt: skip
    trainer = sft_trainer_class(SFTTrainer)(model=model, args=args, train_dataset=data,
                                            processing_class=tiny_tokenizer, share_prefix=False)  # fmt: skip
    return trainer, next(iter(trainer.get_train_dataloader()))


def test_sft_loss_gradients_and_metrics_equal_the_padded_pass(tiny_base, tiny_tokenizer, tmp_path):
    trainer, batch = sft_trainer_and_batch(tiny_base, tiny_tokenizer, tmp_path)
    assert common_prefix(batch["input_ids"], batch["attention_mask"], batch["labels"]) > 10  # the system prompt
    assert (batch["attention_mask"] == 0).any()  # and padding to drop

    def loss_and_gradients():
        trainer.model.zero_grad()
        trainer._metrics["train"].clear()
        loss = trainer.compute_loss(trainer.model, dict(batch))
        loss.backward()
        metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
        return loss.item(), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}, metrics

    plain = loss_and_gradients()
    trainer.share_prefix = True
    shared = loss_and_gradients()
    assert shared[0] == pytest.approx(plain[0], abs=1e-5)
    assert largest_relative_gap(plain[1], shared[1]) < 1e-5
    assert shared[2].keys() == plain[2].keys()
    per_batch = {name: value for name, value in shared[2].items() if name != "num_tokens"}  # that one accumulates
    assert {n: v for n, v in per_batch.items() if v != pytest.approx(plain[2][n], abs=1e-4)} == {}  # entropy, accuracy
    assert shared[2]["num_tokens"] == 2 * plain[2]["num_tokens"]  # the same tokens counted again


@pytest.mark.slow
def test_sft_trains_the_same_with_and_without_the_shared_prefix(tmp_path, tiny_config):
    from safetensors.torch import load_file

    from llm_finetuning.pipeline import RunOptions, run

    runs = {}
    for shared in (True, False):
        config = tiny_config("model.dtype=float32", "sft_training.max_steps=3", "sft_training.logging_steps=1",
                             "evaluation.enabled=false", f"sft_training.shared_prefix={str(shared).lower()}",
                             output_dir=tmp_path / str(shared))  # fmt: skip
        summary = run(config, RunOptions(skip_grpo=True))
        assert summary["shared_prefix"]["on"] is shared
        records = [json.loads(line) for line in (tmp_path / str(shared) / "metrics.jsonl").read_text().splitlines()]
        losses = [r["loss"] for r in records if r.get("phase") == "sft" and "loss" in r]
        runs[shared] = losses, load_file(tmp_path / str(shared) / "sft" / "final" / "model.safetensors")
    (on_losses, on_weights), (off_losses, off_weights) = runs[True], runs[False]
    assert len(on_losses) == 3 and on_losses == pytest.approx(off_losses, abs=1e-5)
    assert max((on_weights[k] - off_weights[k]).abs().max().item() for k in on_weights) < 1e-5
