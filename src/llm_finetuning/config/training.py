"""Training settings of the two phases: what TRL lacks, beside TRL's own fields by name (``trl_fields.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..schema import option, require
from .trl_fields import (
    GRPO_DEFAULTS,
    SFT_DEFAULTS,
    SHARED_WEIGHTS_ENGINE_SHARE,
    OurDefault,
    TRLSection,
    trl_choices,
    trl_defaults,
)

TRL_HELP = ("TRL's fields this section sets, written in the section by their own names (e.g. beta: 0.04); "
            "filled by the loader")  # fmt: skip


@dataclass
class SFTTrainingConfig(TRLSection):
    """Phase 1: supervised fine-tuning that teaches the output format. Any field of TRL's SFTConfig is set here by
    its own name (config/trl_fields.py lists the defaults that are ours, and why)."""

    TRL_CLASS: ClassVar[str] = "SFTConfig"
    OUR_DEFAULTS: ClassVar[dict[str, OurDefault]] = SFT_DEFAULTS

    shared_prefix: bool = option(
        True, "compute the tokens every row of a batch begins with (the system prompt) once and drop the padding "
        "(the same loss); applies on the hf backend with sdpa or eager attention, recorded in summary.json",
    )
    init_adapter: str | None = option(
        None, "SFT starts from these trained weights (a saved adapter folder, e.g. an earlier run's sft/final) "
        "instead of a fresh adapter: more SFT on a trained model; null = fresh",
    )
    trl: dict[str, Any] = option(factory=dict, help=TRL_HELP)

    def __post_init__(self) -> None:
        _check_common_training(self)


@dataclass
class ExpertIterationConfig:
    """Expert iteration (rejection-sampling fine-tuning) after SFT, before GRPO or in its place: each round samples
    the current model on fresh GRPO training problems, keeps the completions the grader accepts and fine-tunes on
    them with sft_training's settings. It learns from answers alone, like GRPO: the baseline GRPO must beat."""

    rounds: int = option(0, "rounds of sample -> keep what the grader accepts -> fine-tune; 0 = no expert iteration")
    problems_per_round: int = option(64, "GRPO training problems sampled per round (the next ones each round)")
    samples_per_problem: int = option(8, "completions sampled per problem, at GRPO's sampling settings")
    keep_per_problem: int = option(2, "at most this many distinct accepted completions kept per problem")
    epochs_per_round: float = option(1.0, "passes over a round's kept completions")
    learning_rate: float | None = option(None, "peak learning rate of each round; null = sft_training.learning_rate")

    def __post_init__(self) -> None:
        require(self.rounds >= 0, "rounds", f"must be >= 0 (got {self.rounds})")
        for key in ("problems_per_round", "samples_per_problem", "keep_per_problem", "epochs_per_round"):
            value = getattr(self, key)
            require(value > 0, key, f"must be > 0 (got {value})")
        if self.learning_rate is not None:
            require(self.learning_rate > 0, "learning_rate", f"must be > 0 (got {self.learning_rate})")


@dataclass
class GRPOTrainingConfig(TRLSection):
    """Phase 2: GRPO reinforcement learning against the reward functions, and how its rollouts sample. Any field
    of TRL's GRPOConfig is set here by its own name (config/trl_fields.py lists the defaults that are ours, and
    why)."""

    TRL_CLASS: ClassVar[str] = "GRPOConfig"
    OUR_DEFAULTS: ClassVar[dict[str, OurDefault]] = GRPO_DEFAULTS

    max_prompt_length: int | None = option(None, "null = computed from the data (percentile rule)")
    advantages: str = option(
        "sum",
        "the advantage estimator, by its name in rewards/estimators.py: sum = the weighted sum normalised in its "
        "group (TRL's default); normalize_then_sum = each reward normalised in the group, then summed (TRL's "
        "multi_objective_aggregation); gated = correctness (the grader's verdict) decides where a group's answers "
        "differ, the rewards' sum only where correctness ties, times tie_weight (no advantages from format alone in "
        "an all-wrong group)",
    )
    tie_weight: float = option(
        0.0, "advantages: gated: weight of the rewards' sum in groups whose correctness ties (0 = such groups teach "
        "nothing; with check_working the only reward weighted, an all-wrong group pushes up the working that went "
        "furthest right: docs/rewards.md)",
    )
    shared_prompt: bool = option(
        True, "compute each group's prompt once in GRPO's log-prob passes (the same log-probs, about 3x less work "
        "with long prompts); applies on the hf backend with sdpa or eager attention, recorded in summary.json",
    )
    difficulty_band: list[float] | None = option(
        None,
        "[low, high]: before GRPO, score each of the first difficulty_pool training problems with difficulty_samples "
        "samples of the starting policy and keep those whose pass rate is within (groups that are all right or all "
        "wrong teach nothing); null = every problem",
    )
    difficulty_samples: int = option(8, "difficulty_band: samples per problem to estimate its pass rate")
    curriculum: bool = option(
        False, "draw each step's problems level by level (the rows' difficulty: a reasoning-gym task's settings, "
        "MATH's level), each level as often as its recent groups held both right and wrong answers; fresh problems "
        "every step (training/curriculum.py)",
    )
    curriculum_window: int = option(16, "curriculum: the recent groups of a level its weight is measured over")
    difficulty_pool: int = option(512, "difficulty_band: training problems scored (the first ones)")
    oversample: int = option(
        1, "prompts generated per step as a multiple of those it trains on: every group is generated and scored, "
        "and the step trains on the groups whose advantages are not all zero first (DAPO's dynamic sampling, one "
        "round; generation costs this many times as much); 1 = off",
    )
    train_per_group: int | None = option(
        None, "train on this many of each group's num_generations completions, those whose advantages spread the "
        "most (as many right as wrong under the gate), their advantages computed over the kept ones: many samples "
        "a problem find its pass rate, few are trained on (PODS' max-variance down-sampling, "
        "training/downsample.py); null = all",
    )
    drop_silent_groups: bool = option(
        False, "train each step on its groups whose advantages are not all zero only (at most as many as it would "
        "train; one where none teaches), so the loss pass costs what the groups that teach cost; false = fill the "
        "step up with silent groups (a constant batch). Pairs with oversample",
    )
    line_credit: str | None = option(
        None, "credit by working line, checked against the row's answer alone (grading/lines.py): a wrong "
        "answer's tokens before the first wrong side of its first rejected line carry no advantage, a right "
        "answer's from there on carry none (training/line_credit.py); the check by name: equations (each line's "
        "sides equal), equal_to_answer (every side is the answer: workings that rewrite the expression); null = "
        "one advantage a completion (TRL's)",
    )
    guidance: bool = option(
        False, "a group whose completions are all wrong gets its problem's worked solution (the SFT completion) in "
        "place of its last completion, so a problem the policy cannot solve yet still teaches (off-policy "
        "guidance); needs GRPO data with worked solutions (reasoning_gym chain_sum, synthetic, gsm8k)",
    )
    negative_weight: float = option(
        1.0, "the trained completions' advantages below zero times this, after the groups are chosen: how hard wrong "
        "answers are pushed down against right ones pushed up (under the gate the two are equal in sum); < 1 leans "
        "toward reinforcing right answers (expert iteration's), > 1 toward suppressing wrong ones (weighted "
        "REINFORCE, arXiv 2506.01347); 1 = GRPO's (training/advantages.py)",
    )
    sft_anchor: float = option(
        0.0, "weight of SFT's own loss on SFT's own data (data.sft: worked solutions of SFT's distribution, never a "
        "GRPO problem's) added to every GRPO loss pass, sft_anchor_rows rows a pass: keeps what SFT taught while "
        "GRPO trains on other problems (InstructGPT's pretraining mix; training/anchor.py); 0 = off",
    )
    sft_anchor_rows: int = option(8, "sft_anchor: the SFT rows of each loss pass (SFT's own batch is 8 by default)")
    keep_best: bool = option(
        False,
        "keep the adapter with the best greedy accuracy over the evaluations during GRPO (the start included, and "
        "the last step) instead of the last one; summary.json says which step (see evaluation.selection_samples)",
    )
    train_validation_split: float = option(0.9, "share of GRPO data used for training (rest = validation)")
    save_path: str = option("grpo_saved_lora", "final adapter; relative paths resolve inside output_dir")
    trl: dict[str, Any] = option(factory=dict, help=TRL_HELP)

    def __post_init__(self) -> None:
        _check_common_training(self)
        for name in ("loss_type", "importance_sampling_level", "scale_rewards"):  # TRL checks them only mid-step
            value, choices = self.trl_value(name), trl_choices(self.TRL_CLASS, name)
            require(not isinstance(value, str) or value in choices, name,
                    f"expected one of {', '.join(sorted(choices))} (the installed TRL's); got {value!r}")
        require(
            self.num_generations >= 2,
            "num_generations",
            f"must be >= 2: GRPO compares completions within a group (got {self.num_generations})",
        )
        require(
            0 < self.train_validation_split <= 1,
            "train_validation_split",
            f"must be in (0, 1] (got {self.train_validation_split})",
        )
        require(self.beta >= 0, "beta", f"must be >= 0 (got {self.beta})")
        require(self.tie_weight >= 0, "tie_weight", f"must be >= 0 (got {self.tie_weight})")
        require(self.negative_weight >= 0, "negative_weight", f"must be >= 0 (got {self.negative_weight})")
        require(self.sft_anchor >= 0, "sft_anchor", f"must be >= 0 (got {self.sft_anchor})")
        require(self.sft_anchor_rows >= 1, "sft_anchor_rows", f"must be >= 1 (got {self.sft_anchor_rows})")
        band = self.difficulty_band
        require(band is None or (len(band) == 2 and 0 <= band[0] <= band[1] <= 1), "difficulty_band",
                f"must be [low, high] with 0 <= low <= high <= 1, or null (got {band})")
        require(self.difficulty_samples >= 2 and self.difficulty_pool > 0, "difficulty_samples",
                "difficulty_samples must be >= 2 and difficulty_pool > 0")
        require(self.oversample >= 1, "oversample", f"must be >= 1 (got {self.oversample})")
        require(self.curriculum_window >= 1, "curriculum_window", f"must be >= 1 (got {self.curriculum_window})")
        require(not self.curriculum or self.per_device_train_batch_size * self.gradient_accumulation_steps
                % self.num_generations == 0, "curriculum",
                "draws whole groups, so each process's batch (per_device_train_batch_size x "
                "gradient_accumulation_steps) must be a multiple of num_generations")  # fmt: skip
        require(self.oversample == 1 or self.per_device_train_batch_size * self.gradient_accumulation_steps
                % self.num_generations == 0, "oversample",
                "chooses among whole groups, so each process's batch (per_device_train_batch_size x "
                "gradient_accumulation_steps) must be a multiple of num_generations")  # fmt: skip
        kept = self.train_per_group
        require(kept is None or 2 <= kept <= self.num_generations, "train_per_group",
                f"must be 2 to num_generations ({self.num_generations}), or null for all (got {kept})")
        steps = self.trl_value("steps_per_generation") or self.gradient_accumulation_steps
        trained = self.trained_per_group
        require(not self.drop_silent_groups or trained % steps == 0, "drop_silent_groups",
                f"a step may keep a single group, which TRL splits into steps_per_generation ({steps}) slices: "
                f"the completions trained per group ({trained}) must be a multiple of it")  # fmt: skip
        require(
            not (self.loss_type == "cispo" and self.epsilon_high is not None and self.epsilon_high < 1),
            "epsilon_high",
            f"cispo caps the importance weight at epsilon_high itself, so {self.epsilon_high} caps every weight "
            "below 1; use 4-8 (the ScaleRL paper) or null (5.0)",
        )
        share = self.vllm_gpu_memory_utilization
        require(share is None or 0 < share <= 1, "vllm_gpu_memory_utilization",
                f"must be in (0, 1], or null for the engine's own default (got {share})")
        _check_vllm_server(self)
        self.sampling()  # its own rules

    @property
    def trained_per_group(self) -> int:
        """How many completions of each group a step trains on: ``train_per_group``, else the whole group."""
        return self.train_per_group or self.num_generations

    @property
    def vllm_allowed(self) -> bool:
        """Whether the run's one engine choice lets vLLM generate (``use_vllm`` true, or null: where it can)."""
        return self.use_vllm is not False

    def engine_memory_share(self, holds_training_weights: bool) -> float:
        """The share of the GPU a vLLM engine may take: ``vllm_gpu_memory_utilization``, or when null 0.7 for an
        engine that holds the training weights (Unsloth's) and TRL's default for one that holds a second copy."""
        if self.vllm_gpu_memory_utilization is not None:
            return self.vllm_gpu_memory_utilization
        if holds_training_weights:
            return SHARED_WEIGHTS_ENGINE_SHARE
        return trl_defaults(self.TRL_CLASS)["vllm_gpu_memory_utilization"]

    def sampling(self) -> VLLMSamplingConfig:
        """How the rollouts sample: TRL's temperature, top_p, top_k and min_p of this section."""
        return VLLMSamplingConfig(self.temperature, self.top_p, self.top_k, self.min_p or 0.0)


def _check_vllm_server(section: GRPOTrainingConfig) -> None:
    require(bool(section.vllm_server_host.strip()), "vllm_server_host", "must name the server's address")
    require(0 < section.vllm_server_port < 65536, "vllm_server_port",
            f"must be a TCP port, 1-65535 (got {section.vllm_server_port})")
    require(section.vllm_server_timeout > 0, "vllm_server_timeout",
            f"must be > 0 seconds (got {section.vllm_server_timeout})")
    require(not (section.vllm_mode == "server" and section.use_vllm is False), "vllm_mode",
            "server generates with vLLM: set use_vllm to true (or null), or vllm_mode to colocate")


def _check_common_training(section: Any) -> None:
    require(section.learning_rate > 0, "learning_rate", f"must be > 0 (got {section.learning_rate})")
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps", "logging_steps", "save_steps"):
        value = getattr(section, key)
        require(value > 0, key, f"must be > 0 (got {value})")
    require(
        section.max_steps == -1 or section.max_steps > 0,
        "max_steps",
        f"must be -1 (use epochs) or > 0 (got {section.max_steps})",
    )


@dataclass
class VLLMSamplingConfig:
    """How completions are sampled (passed to vLLM or to transformers' generate): GRPO's rollouts (its section's
    TRL fields of these names) or the sampled evaluation (evaluation.sampling)."""

    temperature: float = option(1.0, "sampling temperature; too low and a group's completions coincide")
    top_p: float = option(1.0, "nucleus sampling")
    top_k: int = option(-1, "-1 or 0 = no top-k cut")
    min_p: float = option(0.1, "drop tokens below min_p x the top token's probability; 0 = off")

    def __post_init__(self) -> None:
        require(self.temperature > 0, "temperature", f"must be > 0 (got {self.temperature})")
        require(0 < self.top_p <= 1, "top_p", f"must be in (0, 1] (got {self.top_p})")
        require(0 <= self.min_p < 1, "min_p", f"must be in [0, 1) (got {self.min_p})")
