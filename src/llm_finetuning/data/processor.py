"""Turn loaded rows into what TRL trains on: conversational SFT prompt/completion pairs and GRPO prompts.

Stages (counted in ``stats``; an empty stage is a ``DataError`` listing every count):
  loaded -> parsed (has a question) -> answer_found (usable answer) -> [SFT: reasoning_found,
  solution_agrees (generated worked solutions that reach the answer), training_rows (generated data),
  numeric_answer] -> length_filtered -> [GRPO: train / validation].
Rows with unusable answers are dropped and counted, never fatal.

The chat template's generation prompt prefills ``reasoning_start`` (Unsloth's GRPO recipe), so an SFT
completion starts right after it: ``<reasoning><end_working_out><SOLUTION>answer</SOLUTION>``. Rendering the
prompt with ``add_generation_prompt=True`` and appending the completion gives the whole well-formed text. If
a template does not prefill the tag, the completion carries it instead.

GRPO lengths follow the percentile rule in ``lengths.py``, computed on the training rows. The validation
split is seeded; for data with held-out rows (``synthetic:*``, ``reasoning_gym:*``) it is exactly the
held-out problems, which the percentile rule does not thin (they are a fixed evaluation set, and in
``heldout_by: wording`` all of them are the longer word problems): they are dropped only when the prompt
leaves less than ``max_completion_length`` of ``max_seq_length``.

    processor = DatasetProcessor(cfg, tokenizer)               # tokenizer.chat_template already set
    sft = processor.sft_dataset(DatasetLoader.for_data(cfg.data.sft, cfg).load(), cfg.data.sft)
    grpo = processor.grpo_dataset(raw, cfg.data.grpo)          # GRPOData(train, validation, ...)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DatasetSpec, PipelineConfig, PromptConfig
from ..errors import DataError, ModelError
from ..rewards import REWARDS
from ..tasks.workings import WORKED_COLUMN
from .formats import ADAPTERS, FormatAdapter, is_numeric, resolve_adapter
from .lengths import length_limits, token_lengths
from .loader import DatasetLoader

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = [
    "WORKED_COLUMN",
    "DatasetProcessor",
    "GRPOData",
    "conversation",
    "load_grpo_data",
    "load_sft_data",
    "needs_worked_solutions",
]

logger = logging.getLogger(__name__)

# The columns of a GRPO row that hold a solution (a worked one, or the dataset's own): answer-only data has none.
SOLUTION_COLUMNS = (WORKED_COLUMN, "reference_solution")
LARGE_DATASET = 10_000  # rows from which map() uses data.num_proc worker processes
_LENGTH, _PARSED, _ANSWERED, _REASONED, _AGREES = "_length", "_parsed", "_answered", "_reasoned", "_agrees"


@dataclass
class GRPOData:
    """GRPO rows (``prompt`` conversation, ``answer`` string, metadata) and the token budgets they fit."""

    train: Dataset
    validation: Dataset | None  # None when train_validation_split = 1.0
    max_prompt_length: int
    max_completion_length: int
    stats: dict[str, int]  # rows left after each stage, in order
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per stage


class DatasetProcessor:
    """Formats, measures, filters and splits datasets for both phases (see the module docstring)."""

    def __init__(self, config: PipelineConfig, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ModelError(
                "the tokenizer has no chat_template; load it through ModelManager, which sets ours"
            )
        self.config, self.tokenizer = config, tokenizer
        self.prefilled = _generation_prompt_ends_with(tokenizer, config.prompt.reasoning_start)
        if not self.prefilled:
            logger.warning(
                "chat template does not prefill %s: SFT completions carry it", config.prompt.reasoning_start
            )

    def sft_dataset(self, raw: Dataset, spec: DatasetSpec) -> Dataset:
        """Conversational prompt/completion rows that teach the format, filtered by answer and length."""
        adapter = resolve_adapter(spec, raw.column_names)
        _check_sft_source(adapter, spec)
        stats = {"loaded": len(raw)}
        rows = self._format(raw, adapter, spec, "sft")
        rows = self._keep(rows, _PARSED, "parsed", stats, spec)
        rows = self._keep(rows, _ANSWERED, "answer_found", stats, spec)
        rows = self._keep(rows, _REASONED, "reasoning_found", stats, spec)
        if adapter.checks_reasoning:  # other schemas' solutions are the answer's source: nothing to check
            rows = self._keep(rows, _AGREES, "solution_agrees", stats, spec)
        if adapter.heldout_column:
            rows = self._keep_mask(
                rows, np.asarray(rows[adapter.heldout_column]) != "eval", "training_rows", stats, spec
            )
        if self.config.data.numeric_answers_only:
            numeric = np.array([is_numeric(answer) for answer in rows["answer"]], dtype=bool)
            rows = self._keep_mask(rows, numeric, "numeric_answer", stats, spec)
        rows = self._measure(rows, "sft")
        limit = int(self.config.data.sft_max_length_fraction * self.config.model.max_seq_length)
        rows = self._keep_mask(rows, np.asarray(rows[_LENGTH]) <= limit, "length_filtered", stats, spec)
        logger.info("SFT data %s: %s (examples of at most %d tokens)", spec.name, _counts(stats), limit)
        return rows.select_columns(["prompt", "completion"])

    def grpo_dataset(self, raw: Dataset, spec: DatasetSpec) -> GRPOData:
        """Prompt/answer rows within the token budget, split into train and validation."""
        adapter = resolve_adapter(spec, raw.column_names)
        stats, seconds, clock = {"loaded": len(raw)}, {}, time.perf_counter()
        rows = self._format(raw, adapter, spec, "grpo")
        rows = self._keep(rows, _PARSED, "parsed", stats, spec)
        rows = self._keep(rows, _ANSWERED, "answer_found", stats, spec)
        seconds["format"], clock = time.perf_counter() - clock, time.perf_counter()
        rows = self._measure(rows, "grpo")
        seconds["tokenize"], clock = time.perf_counter() - clock, time.perf_counter()
        heldout = _heldout_mask(rows, adapter)
        lengths = np.asarray(rows[_LENGTH])
        grpo = self.config.grpo_training
        limits = length_limits(
            lengths[~heldout],
            percentile=self.config.data.prompt_length_percentile,
            max_seq_length=self.config.model.max_seq_length,
            max_prompt_length=grpo.max_prompt_length,
            max_completion_length=grpo.max_completion_length,
        )
        context_fit = self.config.model.max_seq_length - limits.max_completion_length
        fits = np.where(heldout, lengths <= context_fit, lengths <= limits.keep_at_most)
        rows = self._keep_mask(rows, fits, "length_filtered", stats, spec)
        heldout = heldout[fits]
        seconds["length_filter"], clock = time.perf_counter() - clock, time.perf_counter()
        solutions = [column for column in SOLUTION_COLUMNS if spec.answer_only and column in rows.column_names]
        rows = rows.remove_columns([_LENGTH, *solutions])
        train, validation = self._split(rows, heldout)
        seconds["split"] = time.perf_counter() - clock
        stats.update(train=len(train), validation=len(validation) if validation is not None else 0)
        logger.info(
            "GRPO data %s: %s; max_prompt_length %d, max_completion_length %d (prompts of at most %d tokens kept)",
            spec.name,
            _counts(stats),
            limits.max_prompt_length,
            limits.max_completion_length,
            limits.keep_at_most,
        )
        return GRPOData(
            train, validation, limits.max_prompt_length, limits.max_completion_length, stats, seconds
        )

    def _format(self, raw: Dataset, adapter: FormatAdapter, spec: DatasetSpec, phase: str) -> Dataset:
        kwargs = {
            "adapter_name": adapter.name,
            "spec": spec,
            "prompt": self.config.prompt,
            "phase": phase,
            "prefilled": self.prefilled,
            "worked": phase == "grpo" and needs_worked_solutions(self.config) and not spec.answer_only,
        }
        return raw.map(
            _format_batch,
            batched=True,
            fn_kwargs=kwargs,
            remove_columns=raw.column_names,
            num_proc=self._num_proc(raw),
            desc=f"format {phase}",
        )

    def _measure(self, rows: Dataset, phase: str) -> Dataset:
        kwargs = {"tokenizer": self.tokenizer, "phase": phase}
        return rows.map(
            _measure_batch,
            batched=True,
            fn_kwargs=kwargs,
            num_proc=self._num_proc(rows),
            desc=f"tokenize {phase}",
        )

    def _num_proc(self, dataset: Dataset) -> int | None:
        num_proc = self.config.data.num_proc
        return num_proc if num_proc and num_proc > 1 and len(dataset) >= LARGE_DATASET else None

    def _keep(
        self, rows: Dataset, column: str, stage: str, stats: dict[str, int], spec: DatasetSpec
    ) -> Dataset:
        rows = self._keep_mask(rows, np.asarray(rows[column], dtype=bool), stage, stats, spec)
        return rows.remove_columns([column])

    def _keep_mask(
        self, rows: Dataset, mask: np.ndarray, stage: str, stats: dict[str, int], spec: DatasetSpec
    ):
        stats[stage] = int(mask.sum())
        if stats[stage] == 0:
            raise DataError(
                f"{spec.name}: no rows left after the {stage} stage (counts: {_counts(stats)}); "
                f"{_EMPTY_FIXES.get(stage, 'check the dataset and its format')}"
            )
        return rows if stats[stage] == len(rows) else rows.select(np.flatnonzero(mask))

    def _split(self, rows: Dataset, heldout: np.ndarray) -> tuple[Dataset, Dataset | None]:
        """Held-out rows when the data has them, else a seeded random split by train_validation_split."""
        if heldout.any():
            return rows.select(np.flatnonzero(~heldout)), rows.select(np.flatnonzero(heldout))
        share = self.config.grpo_training.train_validation_split
        n_train = len(rows) if share >= 1 else max(1, round(len(rows) * share))
        if n_train == len(rows):
            return rows, None
        order = np.random.default_rng(self.config.problem_seed).permutation(len(rows))
        return rows.select(np.sort(order[:n_train])), rows.select(np.sort(order[n_train:]))


_EMPTY_FIXES = {
    "parsed": "the question column is empty: check format / question_column",
    "answer_found": "no row has a usable final answer: check format / answer_column (e.g. '#### N', \\boxed{})",
    "reasoning_found": "no row has a worked solution: check format / solution_column",
    "solution_agrees": "no worked solution reaches its row's answer: check the task's settings",
    "training_rows": "raise data.synthetic.num_train / data.reasoning_gym.num_train",
    "numeric_answer": "no answer is a number: set data.numeric_answers_only: false",
    "length_filtered": "every example is too long: raise model.max_seq_length, data.sft_max_length_fraction "
    "or grpo_training.max_prompt_length",
}


def needs_worked_solutions(config: PipelineConfig) -> bool:
    """Whether GRPO rows carry their worked solution (``WORKED_COLUMN``): guidance puts it into all-wrong groups,
    and a reward may score against it (its ``gold_column``, as ``check_working`` does)."""
    readers = (REWARDS.get(spec.name) for spec in config.rewards.rewards)
    return config.grpo_training.guidance or any(reward and reward.gold_column == WORKED_COLUMN for reward in readers)


def _check_sft_source(adapter: FormatAdapter, spec: DatasetSpec) -> None:
    """Refuse SFT on data without worked solutions, naming what has them."""
    if not adapter.has_reasoning or (adapter.name == "columns" and not spec.solution_column):
        raise DataError(
            f"{spec.name}: format '{adapter.name}' has no worked solutions, so it cannot be SFT data; use a "
            "dataset with solutions (openmathreasoning, gsm8k, math, numina, synthetic) or set solution_column"
        )
    refusal = adapter.sft_refusal(spec) if adapter.sft_refusal else None
    if refusal:
        raise DataError(f"{spec.name}: {refusal}")


def _counts(stats: dict[str, int]) -> str:
    return ", ".join(f"{stage}={count}" for stage, count in stats.items())


def _heldout_mask(rows: Dataset, adapter: FormatAdapter) -> np.ndarray:
    if adapter.heldout_column is None:
        return np.zeros(len(rows), dtype=bool)
    return np.asarray(rows[adapter.heldout_column]) == "eval"


def _generation_prompt_ends_with(tokenizer: Any, tag: str) -> bool:
    probe = [{"role": "user", "content": "1 + 1"}]
    return tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True).endswith(tag)


def _format_batch(
    batch: dict[str, list],
    adapter_name: str,
    spec: DatasetSpec,
    prompt: PromptConfig,
    phase: str,
    prefilled: bool,
    worked: bool = False,
) -> dict[str, list]:
    """Adapter rows -> conversation columns plus the flags the stage filters read (picklable for num_proc);
    ``worked``: GRPO rows also carry the SFT completion of a worked solution that reaches the answer."""
    adapter = ADAPTERS[adapter_name]
    problems = [adapter.convert(dict(zip(batch, values)), spec) for values in zip(*batch.values())]
    out: dict[str, list] = {
        "prompt": [conversation(prompt.system_prompt, p.question) for p in problems],
        "answer": [p.answer or "" for p in problems],
        _PARSED: [bool(p.question) for p in problems],
        _ANSWERED: [p.answer is not None for p in problems],
    }
    opening = "" if prefilled else prompt.reasoning_start  # the completion carries what the prompt does not
    if phase == "sft":
        out["completion"] = [
            [{"role": "assistant", "content": _completion(opening, p, prompt)}] for p in problems
        ]
        out[_REASONED] = [bool(p.reasoning) for p in problems]
        out[_AGREES] = [p.reasoning_agrees for p in problems]
    elif worked:
        out[WORKED_COLUMN] = [
            _completion(opening, p, prompt) if p.reasoning and p.reasoning_agrees else "" for p in problems
        ]
    for key in problems[0].metadata if problems else ():
        out[key] = [p.metadata.get(key) for p in problems]
    return out


def conversation(system_prompt: str, question: str) -> list[dict[str, str]]:
    """A question as every phase and tool asks it: the system prompt, then the user turn."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]


def _completion(opening: str, problem: Any, prompt: PromptConfig) -> str:
    return (
        f"{opening}{problem.reasoning or ''}{prompt.reasoning_end}"
        f"{prompt.solution_start}{problem.answer or ''}{prompt.solution_end}"
    )


def _measure_batch(batch: dict[str, list], tokenizer: Any, phase: str) -> dict[str, list]:
    """Tokens per row as the trainer sees it: the prompt with the generation prompt (GRPO) or the whole
    conversation (SFT), rendered by the tokenizer's own chat template."""
    if phase == "grpo":
        texts = tokenizer.apply_chat_template(batch["prompt"], tokenize=False, add_generation_prompt=True)
    else:
        conversations = [p + c for p, c in zip(batch["prompt"], batch["completion"])]
        texts = tokenizer.apply_chat_template(conversations, tokenize=False)
    return {_LENGTH: token_lengths(tokenizer, texts)}


def load_grpo_data(config: PipelineConfig, tokenizer: Any) -> GRPOData:
    """The config's GRPO dataset loaded and shaped: what GRPO trains on, and the held-out problems every
    evaluation (the pipeline's, ``evaluate``'s default, ``debug_grpo.py``'s) is scored on."""
    spec = config.data.grpo
    raw = DatasetLoader.for_data(spec, config).load()
    return DatasetProcessor(config, tokenizer).grpo_dataset(raw, spec)


def load_sft_data(config: PipelineConfig, tokenizer: Any) -> Dataset:
    """The config's SFT dataset loaded and shaped into prompt/completion conversations."""
    spec = config.data.sft
    raw = DatasetLoader.for_data(spec, config).load()
    return DatasetProcessor(config, tokenizer).sft_dataset(raw, spec)
