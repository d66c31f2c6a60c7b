"""Data settings: the datasets of both phases, the generators (offline arithmetic, reasoning-gym's tasks),
and the prompt's tags."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..schema import option, require

DatasetFormat = Literal[
    "auto", "openmathreasoning", "dapo", "gsm8k", "math", "numina", "columns", "synthetic", "reasoning_gym"
]
GYM_PREFIX = "reasoning_gym:"  # a dataset name "reasoning_gym:<task>" generates the task's problems


def gym_task(name: str) -> str | None:
    """The reasoning-gym task a dataset name generates (``reasoning_gym:<task>``), or ``None`` for other names."""
    return name[len(GYM_PREFIX) :] if name.startswith(GYM_PREFIX) else None


HeldoutBy = Literal["tuples", "wording", "both"]
Working = Literal["lines", "columns"]


@dataclass
class DatasetSpec:
    """One dataset: where it lives and how to read its columns."""

    name: str = option(
        "",
        'Hub id, local file/folder (.jsonl/.json/.parquet/.csv), "synthetic:arithmetic", or '
        '"reasoning_gym:<task>" (a reasoning-gym task, e.g. reasoning_gym:gsm_symbolic)',
    )
    subset: str | list[str] | None = option(None, "Hub configuration name, or a list of them to concatenate")
    split: str = option("train", "split to load")
    format: DatasetFormat = option("auto", "schema adapter; auto detects from the columns")
    max_samples: int | None = option(None, "keep at most this many rows after shuffling")
    question_column: str = option("question", "format=columns: column holding the problem")
    answer_column: str = option("answer", "format=columns: column holding the final answer")
    solution_column: str | None = option(None, "format=columns: column holding a worked solution (SFT)")
    keep_answer_instruction: bool = option(
        False, 'format=dapo: keep DAPO\'s "Answer: $Answer" instruction in prompts (default: stripped)'
    )
    answer_only: bool = option(
        False,
        "GRPO data: its rows carry the problem and the final answer alone (no worked or reference solution reaches "
        "GRPO); guidance and rewards that read a worked solution are refused",
    )
    train_settings: dict[str, Any] | None = option(
        None,
        "reasoning_gym:<task>: settings of this dataset's training problems, over data.reasoning_gym.settings "
        "(e.g. GRPO on two-digit sums only: {min_digits: 2}); held-out problems keep those settings and no "
        "training problem is a held-out question",
    )

    def __post_init__(self) -> None:
        if self.max_samples is not None:
            require(self.max_samples > 0, "max_samples", f"must be > 0 (got {self.max_samples})")
        generated = gym_task(self.name) is not None
        require(
            generated or self.format != "reasoning_gym",
            "format",
            f'reasoning_gym reads generated problems: set name to "reasoning_gym:<task>" (got {self.name!r})',
        )
        require(
            not generated or self.format in ("auto", "reasoning_gym"),
            "format",
            f"{self.name} generates reasoning-gym problems: use format reasoning_gym (got {self.format})",
        )
        require(
            self.train_settings is None or (generated and isinstance(self.train_settings, Mapping)),
            "train_settings",
            f'a mapping of a reasoning-gym task\'s settings, for a "reasoning_gym:<task>" name (got {self.name!r})',
        )


@dataclass
class SyntheticDataConfig:
    """The offline arithmetic word-problem generator behind ``synthetic:arithmetic``."""

    num_train: int = option(4000, "training problems generated (SFT and GRPO draw from these)")
    num_eval: int = option(200, "held-out problems (distinct questions), disjoint from training")
    min_operand: int = option(0, "smallest operand")
    max_operand: int = option(20, "largest operand")
    operations: list[str] = option(factory=lambda: ["+", "-"], help='drawn from "+", "-", "*"')
    num_operations: int = option(
        1, 'operations per problem (1 = "a + b", 2 = "a + b - c"), worked left to right'
    )
    word_problem_fraction: float = option(
        0.5, 'share phrased as a story ("Tom has 3 apples..."), rest "What is 3 + 4?"'
    )
    allow_negative: bool = option(False, "false = redraw problems whose working goes below zero")
    eval_fraction_of_tuples: float = option(
        0.15, "heldout_by=tuples: share of (operands, operations) tuples held out"
    )
    heldout_by: HeldoutBy = option(
        "tuples", 'held out: "tuples" (unseen facts) or "wording" (unseen name+item stories)'
    )

    working: Working = option("lines", "lines or columns")

    def __post_init__(self) -> None:
        require(
            self.heldout_by in ("tuples", "wording", "both"),
            "heldout_by",
            f'must be "tuples", "wording" or "both" (got {self.heldout_by!r})',
        )
        require(
            self.working in ("lines", "columns"),
            "working",
            f'must be "lines" or "columns" (got {self.working!r})',
        )
        require(self.num_train > 0, "num_train", f"must be > 0 (got {self.num_train})")
        require(self.num_eval >= 0, "num_eval", f"must be >= 0 (got {self.num_eval})")
        require(
            self.min_operand <= self.max_operand,
            "max_operand",
            f"must be >= min_operand (got {self.min_operand}..{self.max_operand})",
        )
        unknown = sorted(set(self.operations) - {"+", "-", "*"})
        require(
            bool(self.operations) and not unknown, "operations", f'use "+", "-", "*" (got {self.operations})'
        )
        require(self.num_operations >= 1, "num_operations", f"must be >= 1 (got {self.num_operations})")
        require(
            0 <= self.word_problem_fraction <= 1,
            "word_problem_fraction",
            f"must be in [0, 1] (got {self.word_problem_fraction})",
        )
        require(
            0 <= self.eval_fraction_of_tuples < 1,
            "eval_fraction_of_tuples",
            f"must be in [0, 1) (got {self.eval_fraction_of_tuples})",
        )
        require(
            self.num_eval == 0 or self.heldout_by == "wording" or self.eval_fraction_of_tuples > 0,
            "eval_fraction_of_tuples",
            "must be > 0 when num_eval > 0 (held-out problems come from held-out tuples)",
        )
        if self.working == "columns":
            require(
                "*" not in self.operations,
                "working",
                'columns work "+" and "-" only: drop "*" from operations or use working: lines',
            )
            require(
                self.min_operand >= 0 and not self.allow_negative,
                "working",
                "columns work non-negative numbers only: set min_operand >= 0 and allow_negative: false",
            )


@dataclass
class ReasoningGymConfig:
    """reasoning-gym's tasks behind ``reasoning_gym:<task>`` (the reasoning-gym extra); see docs/data.md."""

    settings: dict[str, dict[str, Any]] = option(
        factory=dict,
        help="per task, the settings passed to reasoning_gym.create_dataset "
        "(e.g. chain_sum: {min_terms: 2, max_terms: 3, min_digits: 1, max_digits: 2})",
    )
    num_train: int = option(4000, "training problems generated (SFT and GRPO draw from these)")
    num_eval: int = option(
        200, "held-out problems: another seed, held-out templates, no question that is in training"
    )
    seed: int | None = option(
        None,
        "first random stream of the training problems; null = data.seed x 10000000 (seeds share no problem)",
    )
    eval_seed: int | None = option(
        None,
        "seed of the held-out problems; null = seed + 1000000 (reasoning-gym makes entry i from seed + i, "
        "so training and held-out entries never share a random stream)",
    )
    heldout_templates: float = option(
        0.2,
        "tasks built from templates (gsm_symbolic: 85 GSM8K templates): share of templates never in "
        "training, the only ones held-out problems use; 0 = hold out by seed only",
    )
    working: Literal["lines", "rewrite", "columns"] = option(
        "lines",
        "how SFT works an arithmetic expression (chain_sum, basic_arithmetic): lines = each operation alone "
        "(6 - 0 = 6, 6 + 5 = 11); rewrite = the expression left after each operation (6 - 0 + 5 = 6 + 5, "
        "6 + 5 = 11); columns = the expression left, then its first operation on magnitudes digit by digit "
        "(44-84 = -(84-44): 4-4-0=0 8-4-0=4 =-40); rewrite and columns for flat chains of + and -",
    )

    def __post_init__(self) -> None:
        require(self.num_train > 0, "num_train", f"must be > 0 (got {self.num_train})")
        require(self.num_eval >= 0, "num_eval", f"must be >= 0 (got {self.num_eval})")
        require(
            0 <= self.heldout_templates < 1,
            "heldout_templates",
            f"must be in [0, 1) (got {self.heldout_templates})",
        )
        for task, settings in self.settings.items():
            require(
                isinstance(settings, Mapping),
                f"settings.{task}",
                f"expected a mapping of the task's settings, got {settings!r}",
            )


@dataclass
class DataConfig:
    """Datasets for both phases and how they are processed."""

    sft: DatasetSpec = option(
        factory=lambda: DatasetSpec(name="unsloth/OpenMathReasoning-mini", split="cot"),
        help="SFT (format-teaching) data",
    )
    grpo: DatasetSpec = option(
        factory=lambda: DatasetSpec(name="open-r1/DAPO-Math-17k-Processed", subset="en"),
        help="GRPO (reward) data",
    )
    synthetic: SyntheticDataConfig = option(factory=SyntheticDataConfig, help="generator settings")
    reasoning_gym: ReasoningGymConfig = option(
        factory=ReasoningGymConfig, help="reasoning-gym's tasks (reasoning_gym:<task>)"
    )
    prompt_length_percentile: float = option(90.0, "keep GRPO prompts at or under this length percentile")
    sft_max_length_fraction: float = option(0.5, "drop SFT examples longer than this share of max_seq_length")
    numeric_answers_only: bool = option(
        True, "SFT: keep only examples whose answer is a number (Unsloth's recipe)"
    )
    seed: int | None = option(
        None, "the problems' seed: which problems are generated, their order and the validation split; null = the "
        "run's seed (set it to keep the problems while seed changes the training's draws)",
    )
    num_proc: int | None = option(None, "worker processes for map() on large datasets")

    def __post_init__(self) -> None:
        require(
            0 < self.prompt_length_percentile <= 100,
            "prompt_length_percentile",
            f"must be in (0, 100] (got {self.prompt_length_percentile})",
        )
        require(
            0 < self.sft_max_length_fraction <= 1,
            "sft_max_length_fraction",
            f"must be in (0, 1] (got {self.sft_max_length_fraction})",
        )


@dataclass
class PromptConfig:
    """Tags and system prompt injected into the chat template and read by the rewards."""

    system_prompt: str = option(
        "You are given a problem. Think about the problem and provide your working out. "
        "Place it between <start_working_out> and <end_working_out>. "
        "Then, provide your solution between <SOLUTION></SOLUTION>",
        "system message of every conversation",
    )
    reasoning_start: str = option(
        "<start_working_out>", "opens the reasoning (prefilled by the generation prompt)"
    )
    reasoning_end: str = option("<end_working_out>", "closes the reasoning")
    solution_start: str = option("<SOLUTION>", "opens the final answer")
    solution_end: str = option("</SOLUTION>", "closes the final answer")
    chat_template: str = option(
        "templates/chat_template.jinja", "our Jinja template (template_source: ours), relative to the project root"
    )
    template_source: Literal["auto", "model", "ours"] = option(
        "auto",
        "whose chat template lays out the turns: model = the tokenizer's own (its role headers and special tokens), "
        "with the system prompt and the reasoning_start prefill carried in; ours = chat_template (ChatML headers "
        "where the tokenizer has them, else a plain layout); auto = the model's own where it is not ChatML and "
        "passes the checks at load (docs/models.md), else ours",
    )

    def __post_init__(self) -> None:
        tags = [self.reasoning_start, self.reasoning_end, self.solution_start, self.solution_end]
        require(all(tags), "reasoning_start", "the four tags must be non-empty")
        require(len(set(tags)) == 4, "solution_end", f"the four tags must differ (got {tags})")
