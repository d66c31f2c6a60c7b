"""Our GRPO phase vs a bare TRL GRPOTrainer: same model, data, rewards and settings, side by side in one run.

    uv run python benchmarks/grpo_overhead.py [--steps 30] [--rounds 2]

What "ours" adds around TRL — the checkpoint marker, metrics.jsonl logging, the signal handler, the reward
registry's never-raise wrappers — must not slow a step down: target ratio <= 1.05. Periodic evaluation is
excluded (it is generation on the validation set, not training). Both sides start from the same freshly
built tiny model (weights copied), alternate in rounds to spread machine noise, and the per-step time is
taken from the wall clock between on_step_begin and on_step_end, median over the steps after a warm-up.
Rounds alternate which side runs first.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

ROOT = Path(__file__).resolve().parents[1]


class StepTimer(TrainerCallback):
    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter() - self._start)


def setup(steps: int, output_dir: Path):
    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.data import load_grpo_data
    from llm_finetuning.rewards import build_rewards
    from llm_finetuning.session import Session

    config = PipelineConfig.from_yaml(
        ROOT / "configs" / "tiny.yaml",
        [f"output_dir={output_dir}", f"grpo_training.max_steps={steps}", f"grpo_training.save_steps={steps}",
         "evaluation.grpo_every_steps=null"],
    )
    manager = Session.open(config).manager
    _model, tokenizer = manager.load()
    data = load_grpo_data(config, tokenizer)
    funcs, weights = build_rewards(config.rewards, config.prompt)
    return config, manager, data, funcs, weights


def time_ours(config, manager, data, funcs, weights, output_dir: Path) -> list[float]:
    from llm_finetuning.reporting.run_outputs import MetricsWriter
    from llm_finetuning.training.grpo import GRPOPhase

    timer = StepTimer()
    from llm_finetuning.rollout import EngineOwner
    from llm_finetuning.session.plan import RunPlan

    plan = RunPlan.resolve(config, manager.backend).with_model(config, manager.model)
    engines = EngineOwner(config, manager.backend.machine, manager.precision.weights_name)
    phase = GRPOPhase(config, plan, manager, engines, data, funcs, weights, MetricsWriter(output_dir / "metrics.jsonl"))
    phase.callbacks.append(timer)
    phase.run()
    return timer.times


def time_bare(config, manager, data, funcs, weights, output_dir: Path) -> list[float]:
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.model.hardware import on_cuda
    from llm_finetuning.training import trl_compat
    from llm_finetuning.training.arguments import grpo_arguments

    trl_compat.install(cuda=on_cuda())
    timer = StepTimer()
    from llm_finetuning.session.plan import RunPlan

    plan = RunPlan.resolve(config, manager.backend)
    args = GRPOConfig(**grpo_arguments(config, output_dir, plan, data.max_completion_length, weights))
    trainer = GRPOTrainer(model=manager.model, args=args, reward_funcs=funcs, train_dataset=data.train,
                          processing_class=manager.tokenizer, callbacks=[timer])
    trainer.train()
    return timer.times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3, help="steps dropped from the start of each run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config, manager, data, funcs, weights = setup(args.steps, tmp / "setup")
        initial = copy.deepcopy(manager.model.state_dict())
        samples: dict[str, list[float]] = {"bare": [], "ours": []}
        runners = [("bare", time_bare), ("ours", time_ours)]
        for round_index in range(args.rounds):
            # alternate which side goes first, and start each from a collected heap, so neither side
            # pays for the other's leftovers
            for name, runner in runners if round_index % 2 == 0 else runners[::-1]:
                gc.collect()
                manager.model.load_state_dict(initial)
                times = runner(config, manager, data, funcs, weights, tmp / f"{name}{round_index}")
                samples[name].extend(times[args.warmup:])
                print(f"round {round_index} {name}: median step {statistics.median(times[args.warmup:]):.3f}s")
    bare, ours = statistics.median(samples["bare"]), statistics.median(samples["ours"])
    print(f"\nmedian step time  bare TRL {bare:.3f}s  ours {ours:.3f}s  ratio {ours / bare:.3f} (target <= 1.05)")
    print(f"steps timed: {len(samples['bare'])} bare, {len(samples['ours'])} ours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
