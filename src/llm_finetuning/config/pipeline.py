"""The whole run's config: every section, the rewards, the evaluation, and loading from YAML with overrides."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from ..schema import (
    ConfigError,
    apply_override,
    build_dataclass,
    merge_onto_defaults,
    option,
    require,
    to_plain,
)
from .data import DataConfig, PromptConfig
from .migrate import migrated
from .model import ModelConfig
from .training import ExpertIterationConfig, GRPOTrainingConfig, SFTTrainingConfig, VLLMSamplingConfig


@dataclass
class RewardSpec:
    """One reward function by registered name (or your own function), with its weight and parameters."""

    name: str = option(
        "", "a name from llm_finetuning.rewards.available_rewards(), or your own function as "
        "package.module:function or ./file.py:function (docs/rewards.md)",
    )
    weight: float = option(1.0, "multiplier in the summed reward")
    params: dict[str, Any] = option(
        factory=dict, help="keyword arguments for the reward (your own function's: passed on every call; "
        "sandbox and timeout are the wrapper's)",
    )


def _notebook_rewards() -> list[RewardSpec]:
    names = ["match_format_exactly", "match_format_approximately", "check_answer", "check_numbers"]
    return [RewardSpec(name=name) for name in names]


@dataclass
class RewardConfig:
    """The rewards GRPO optimises (by default the Unsloth GRPO notebook's four graded rewards)."""

    rewards: list[RewardSpec] = option(factory=_notebook_rewards, help="summed with their weights")

    def __post_init__(self) -> None:
        require(bool(self.rewards), "rewards", "list at least one reward")


@dataclass
class EvaluationConfig:
    """Greedy and sampled evaluation on held-out problems before SFT, after SFT and after GRPO."""

    enabled: bool = option(True, "run the before/after evaluations")
    num_samples: int = option(200, "held-out problems scored each time (capped by the validation split)")
    sampled_k: int = option(
        4, "samples per problem for sampled_answer_accuracy (avg@k at the GRPO temperature)"
    )
    max_new_tokens: int | None = option(None, "null = GRPO's max_completion_length")
    batch_size: int = option(32, "prompts per generate() call (hf engine; vLLM schedules its own batches)")
    eval_before_sft: bool = option(True, "also score the untouched base model")
    grpo_every_steps: int | None = option(
        20, "greedy evaluations during GRPO, every N steps (and after its last step with grpo_training.keep_best); "
        "null = none",
    )
    selection_samples: int = option(
        0,
        "held-out problems after the first num_samples that the evaluations during GRPO score (and "
        "grpo_training.keep_best chooses on), so the reported after-GRPO figure is not the one a checkpoint was "
        "chosen by; 0 = they score the reported problems",
    )
    sample_answers: int = option(
        3,
        "held-out problems whose greedy answers every evaluation shows (console), records (metrics.jsonl, "
        "summary.json) and report.html puts side by side; the same problems each time; 0 = none",
    )
    sampling: VLLMSamplingConfig | None = option(
        None,
        "how the sampled accuracy samples (temperature, top_p, top_k, min_p); null = as GRPO's rollouts "
        "(grpo_training's temperature, top_p, top_k, min_p). Rollouts should sample the whole distribution the loss trains (min_p 0); an evaluation "
        "may sample as the model will be used",
    )
    engine: Literal["auto", "hf", "vllm"] = option(
        "auto",
        "what generates: hf = model.generate; vllm = a vLLM engine fed the training weights (Unsloth's own "
        "engine when the model has one); auto = the model's engine, else GRPO's vLLM, else vLLM on CUDA, "
        "else, on a CPU, vLLM where it is installed and the model has 50M parameters or more (below that its "
        "start costs more than it saves), else hf",
    )

    def __post_init__(self) -> None:
        require(self.num_samples > 0, "num_samples", f"must be > 0 (got {self.num_samples})")
        require(self.sampled_k >= 1, "sampled_k", f"must be >= 1 (got {self.sampled_k})")
        require(self.batch_size > 0, "batch_size", f"must be > 0 (got {self.batch_size})")
        require(self.sample_answers >= 0, "sample_answers", f"must be >= 0 (got {self.sample_answers})")
        require(self.selection_samples >= 0, "selection_samples", f"must be >= 0 (got {self.selection_samples})")
        every = self.grpo_every_steps
        require(every is None or every > 0, "grpo_every_steps", f"must be > 0, or null for none (got {every})")


@dataclass
class PipelineConfig:
    """The whole run: every section above plus where outputs go."""

    output_dir: str = option("outputs", "checkpoints, logs, metrics, plots and the final adapter")
    seed: int = option(
        3407, "the run's one seed: torch and python, sampling, the adapter's initialisation, and the problems unless "
        "data.seed is set",
    )
    report_to: str | list[str] = option(
        "none",
        "experiment trackers, one or a list of what transformers reports to (tensorboard, wandb, trackio, mlflow, "
        "...); tensorboard, wandb and trackio also get every evaluation, the sample answers and the before/after "
        "table; none = no tracker",
    )
    run_name: str | None = option(None, "the run's name in the trackers; null = the output folder's name")
    grader: Literal["ours", "math_verify"] = option(
        "ours",
        "whose verdict the answer rewards and evaluation use: ours (docs/grader.md), or math-verify's, the one most "
        "published GRPO figures use (the math-verify extra)",
    )
    project: str = option("llm-finetuning", "the trackers' project (wandb, trackio)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = option("INFO", "console and training.log level")
    num_threads: int | None = option(
        None,
        "torch CPU threads for this run (recorded in summary.json); null = torch's default, one per core",
    )
    heap_trim_interval: float | None = option(
        1.0,
        "seconds between handing the C heap's free pages back to the system during a run (glibc's malloc_trim, "
        "from a thread): resident memory follows what is live instead of the heap's high-water mark (SmolLM2-135M's "
        "run: peak 6.9 -> 4.5 GiB, steps up to 5 % longer); null = never",
    )
    model: ModelConfig = option(
        factory=ModelConfig, help="which base model, which backend, LoRA or full fine-tuning"
    )
    data: DataConfig = option(factory=DataConfig, help="datasets for both phases and how they are processed")
    prompt: PromptConfig = option(factory=PromptConfig, help="tags and system prompt")
    sft_training: SFTTrainingConfig = option(
        factory=SFTTrainingConfig, help="phase 1: supervised fine-tuning (and any field of TRL's SFTConfig by name)"
    )
    expert_iteration: ExpertIterationConfig = option(
        factory=ExpertIterationConfig, help="after SFT: rejection-sampling fine-tuning on GRPO's problems (off by default)"
    )
    grpo_training: GRPOTrainingConfig = option(
        factory=GRPOTrainingConfig, help="phase 2: GRPO (and any field of TRL's GRPOConfig by name)"
    )
    rewards: RewardConfig = option(factory=RewardConfig, help="the rewards GRPO optimises")
    evaluation: EvaluationConfig = option(
        factory=EvaluationConfig, help="held-out evaluation before SFT, after SFT and after GRPO"
    )

    def __post_init__(self) -> None:
        require(bool(self.output_dir.strip()), "output_dir", "must name a folder (got an empty string)")
        self.report_to = _trackers(self.report_to)
        _check_save_path(self.grpo_adapter_path, Path(self.output_dir).resolve())
        if self.num_threads is not None:
            require(
                self.num_threads > 0,
                "num_threads",
                f"must be > 0, or null for torch's default (got {self.num_threads})",
            )
        if self.heap_trim_interval is not None:
            require(
                self.heap_trim_interval > 0,
                "heap_trim_interval",
                f"must be > 0 seconds, or null to never trim (got {self.heap_trim_interval})",
            )
        grpo = self.grpo_training
        require(not (grpo.keep_best and self.evaluation.grpo_every_steps is None), "grpo_training.keep_best",
                "chooses among the evaluations during GRPO: set evaluation.grpo_every_steps, or keep_best: false")
        if grpo.max_prompt_length is not None and grpo.max_completion_length is not None:
            total = grpo.max_prompt_length + grpo.max_completion_length
            require(
                total <= self.model.max_seq_length,
                "grpo_training.max_completion_length",
                f"max_prompt_length + max_completion_length = {total} exceeds model.max_seq_length = "
                f"{self.model.max_seq_length}",
            )

    @property
    def tracker_run_name(self) -> str:
        """The run's name in the trackers: ``run_name``, else the output folder's name."""
        return self.run_name or Path(self.output_dir).resolve().name

    @property
    def problem_seed(self) -> int:
        """The seed the problems are made, ordered and split with: ``data.seed``, else the run's ``seed``."""
        return self.seed if self.data.seed is None else self.data.seed

    @property
    def rollout_sampling(self) -> VLLMSamplingConfig:
        """How GRPO's rollouts sample (its section's temperature, top_p, top_k and min_p)."""
        return self.grpo_training.sampling()

    @property
    def grpo_adapter_path(self) -> Path:
        """Where GRPO's final adapter goes: ``grpo_training.save_path``, a relative one inside ``output_dir``."""
        path = Path(self.grpo_training.save_path)
        return (path if path.is_absolute() else Path(self.output_dir) / path).resolve()

    @property
    def sft_adapter_path(self) -> Path:
        """Where SFT's final adapter goes (and where ``--skip-sft`` continues from)."""
        return Path(self.output_dir) / "sft" / "final"

    @property
    def expert_iteration_adapter_path(self) -> Path:
        """Where expert iteration's adapter goes, after each round (GRPO continues from it)."""
        return Path(self.output_dir) / "expert_iteration" / "final"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PipelineConfig:
        """Build from plain data; keys not given keep their defaults (sections are merged, not replaced); keys of
        an older layout are moved where they live now, with one line saying so (``migrate.py``)."""
        return build_dataclass(cls, merge_onto_defaults(to_plain(cls()), migrated(raw)), path="")

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: list[str] | None = None) -> PipelineConfig:
        """Load ``path`` (or a shipped config by name: ``tiny``), apply ``section.field=value`` overrides, validate;
        raise ConfigError on any problem."""
        from .resources import config_path, shipped_configs

        path = config_path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: config file not found; give a YAML file, or a shipped config by name "
                              f"({', '.join(shipped_configs())})")  # fmt: skip
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a UTF-8 text file; save the config as UTF-8 YAML") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check its permissions") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
        for override in overrides or []:
            apply_override(raw, override)
        return cls.from_dict(raw)

    def with_overrides(self, overrides: list[str]) -> PipelineConfig:
        raw = self.to_dict()
        for override in overrides:
            apply_override(raw, override)
        return PipelineConfig.from_dict(raw)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def replace(self, **changes: Any) -> PipelineConfig:
        return dataclasses.replace(self, **changes)


def _trackers(value: str | list[str]) -> list[str]:
    """``report_to`` as a list of tracker names (``none`` and ``[]``: none); which names exist is checked with
    the trackers (``session/checks.py``)."""
    names = [value] if isinstance(value, str) else list(value)
    return [name for name in names if name != "none"]


# What a run keeps in output_dir besides its final adapter: a save there would replace them.
RUN_FOLDERS = ("sft", "grpo", "plots", ".tiny_base", "previous_run")


def _check_save_path(save: Path, output_dir: Path) -> None:
    """The final adapter must not go where it would replace the run's own outputs: ``output_dir`` itself, a
    folder above it, or one of the folders the run writes (``RUN_FOLDERS``)."""
    if save == output_dir or save in output_dir.parents:
        where = "output_dir itself" if save == output_dir else f"a folder above output_dir ({output_dir})"
        raise ConfigError(f"grpo_training.save_path: resolves to {save}, {where}; a save there would replace "
                          "the run's outputs; name a folder of its own, e.g. grpo_saved_lora")  # fmt: skip
    for folder in RUN_FOLDERS:
        own = output_dir / folder
        if save == own or own in save.parents:
            raise ConfigError(f"grpo_training.save_path: resolves to {save}, inside the run's own {folder}/ "
                              "folder; name a folder of its own, e.g. grpo_saved_lora")  # fmt: skip
