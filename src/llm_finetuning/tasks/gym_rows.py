"""Problems from reasoning-gym's tasks (``reasoning_gym:<task>``), with held-out problems that share no
seed, template or question with training.

Why: reasoning-gym has about 100 task families, each with its own verifier, so GRPO can train on any of them
(the ``reasoning_gym`` reward) and SFT on those with worked solutions (``workings.py``). The evaluation
must still measure problems the model never saw, and "another seed" alone does not promise that:

- **by seed**: reasoning-gym makes entry ``i`` of a dataset from the random stream ``seed + i``, so training
  entries come from ``seed, seed + 1, …`` and held-out ones from ``eval_seed, eval_seed + 1, …`` (default
  ``seed + 1000000``); the two ranges must not overlap (a ``DataError`` names the fix when a chosen
  ``eval_seed`` makes them). ``data.seed`` s starts the training streams at ``s × 10000000``, not at ``s``:
  seeds one apart would otherwise shift both windows by one entry and share every problem but one;
- **by template**: a task built from templates (``gsm_symbolic``: one generator per GSM8K problem, 85 in use)
  holds a seeded share ``heldout_templates`` of them out: training never uses them, held-out problems use
  only them, so a held-out problem is a new story, not new numbers in a known one;
- **by question**: a held-out question that is also a training question (small problem spaces repeat) is
  skipped, and held-out questions are distinct.

Raw rows: ``question``, ``answer`` (the entry's), ``working`` (our worked solution, ``""`` when the task has
none) and ``working_agrees`` (it reaches the entry's answer), ``split`` ("train" | "eval"), ``task``,
``template`` (-1 for tasks without templates), ``reasoning_gym_entry`` (the entry's reference, which the
``reasoning_gym`` reward rebuilds the entry from) and ``difficulty`` (the entry's own values of the settings
its task varies, as JSON: ``{"num_terms": 3, "num_digits": 2}`` for chain_sum; evaluation reports accuracy per
value). Training rows come first. Same config and seed, same rows.

A dataset may train on problems of its own settings (``data.grpo.train_settings``, e.g. GRPO on the two-digit
sums only): its training rows are then drawn with those, skipping every held-out question, and its held-out rows
are the ones above, so the measure does not move with the training distribution.

    rows = generate_task_rows(ReasoningGymConfig(num_train=500, num_eval=50), "gsm_symbolic", seed=0)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import ReasoningGymConfig
from ..errors import DataError
from . import gym
from .workings import WORKINGS, agrees

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["EVAL_SEED_OFFSET", "SEED_STRIDE", "TEMPLATES", "difficulty", "generate_task_rows", "heldout_templates"]

EVAL_SEED_OFFSET = 1_000_000  # default eval_seed = seed + this: far past any training stream
SEED_STRIDE = 10_000_000  # data.seed s draws from the streams s x this onward: past seed s - 1's held-out ones
_GROWTH, _ROUNDS = 2, 7  # a draw that falls short retries with a dataset twice as large, up to 64x


@dataclass(frozen=True)
class TemplateRule:
    """How a task's problems come from templates: every template, and the template of entry ``index``."""

    templates: Callable[[], Sequence[int]]
    template_of: Callable[[Any, int], int]


def _gsm_templates() -> Sequence[int]:
    from reasoning_gym.arithmetic.gsm_symbolic.gsm_symbolic import tasks_ok  # the generators it draws from

    return tuple(tasks_ok)


# reasoning-gym task -> its templates. Its entries' metadata["source_index"] is the entry's index, not a
# template: gsm_symbolic's template is the generator it drew for the entry (dataset.task_indices).
TEMPLATES: dict[str, TemplateRule] = {
    "gsm_symbolic": TemplateRule(_gsm_templates, lambda dataset, index: dataset.task_indices[index]),
}


@dataclass
class _Draw:
    """Entries of one stream that passed the filter, and the dataset size they were drawn from."""

    rows: list[dict[str, Any]]
    size: int


def heldout_templates(task: str, share: float, seed: int) -> frozenset[int]:
    """The templates of ``task`` kept out of training: a seeded ``share`` of them (at least one when
    ``share > 0``); empty for tasks without templates."""
    rule = TEMPLATES.get(task)
    if rule is None or share <= 0:
        return frozenset()
    templates = sorted(rule.templates())
    count = max(1, round(share * len(templates)))
    chosen = np.random.default_rng([seed, 7]).choice(len(templates), size=count, replace=False)
    return frozenset(templates[i] for i in chosen)


def generate_task_rows(
    cfg: ReasoningGymConfig, task: str, seed: int, train_settings: Mapping[str, Any] | None = None
) -> Dataset:
    """``cfg.num_train`` training rows, then ``cfg.num_eval`` held-out rows (module docstring). With
    ``train_settings`` (a dataset's own, over the task's settings), the training rows are drawn with those
    instead, from the same streams, skipping every held-out question; the held-out rows stay the ones the
    task's settings give, so a run that trains on other problems is still measured on the same ones."""
    from datasets import Dataset

    seed = cfg.seed if cfg.seed is not None else seed * SEED_STRIDE
    eval_seed = cfg.eval_seed if cfg.eval_seed is not None else seed + EVAL_SEED_OFFSET
    heldout = heldout_templates(task, cfg.heldout_templates, seed)
    settings = cfg.settings.get(task, {})
    train = _draw(task, settings, seed, cfg.num_train, lambda row: row["template"] not in heldout, style=cfg.working)
    _check_count(task, train, cfg.num_train, "training problems outside the held-out templates", "num_train")
    evals = None
    if cfg.num_eval:
        in_heldout = (lambda row: row["template"] in heldout) if heldout else (lambda row: True)
        questions = frozenset(row["question"] for row in train.rows)
        evals = _draw(task, settings, eval_seed, cfg.num_eval, in_heldout, exclude=questions, split="eval",
                      style=cfg.working)
        _check_streams(task, (seed, train.size), (eval_seed, evals.size))
        _check_count(task, evals, cfg.num_eval, "held-out problems unlike every training problem", "num_eval")
    if train_settings is not None:  # the task's own training draw above still decides the held-out rows
        train = _own_training(cfg, task, seed, {**settings, **train_settings}, heldout, evals)
        if evals:
            _check_streams(task, (seed, train.size), (eval_seed, evals.size))
    rows = train.rows + (evals.rows if evals else [])
    return Dataset.from_dict({key: [row[key] for row in rows] for key in _COLUMNS})


def _own_training(cfg: ReasoningGymConfig, task: str, seed: int, settings: dict[str, Any],
                  heldout: frozenset[int], evals: _Draw | None) -> _Draw:  # fmt: skip
    """Training rows drawn with a dataset's own settings: outside the held-out templates and questions."""
    unseen = frozenset(row["question"] for row in evals.rows) if evals else frozenset()
    train = _draw(task, settings, seed, cfg.num_train,
                  lambda row: row["template"] not in heldout and row["question"] not in unseen, style=cfg.working)
    _check_count(task, train, cfg.num_train, "training problems of the dataset's train_settings outside the "
                 "held-out problems", "num_train")  # fmt: skip
    return train


_COLUMNS = (
    "question", "answer", "working", "working_agrees", "split", "task", "template", gym.ENTRY_COLUMN, "difficulty",
)  # fmt: skip


def _draw(
    task: str,
    settings: dict[str, Any],
    seed: int,
    count: int,
    keep: Callable[[dict[str, Any]], bool],
    exclude: frozenset[str] | None = None,
    split: str = "train",
    style: str = "lines",
) -> _Draw:
    """The first ``count`` entries of the stream ``seed`` that ``keep`` accepts; with ``exclude`` (held-out
    rows), only distinct questions not in it. A dataset's size can change its entries (gsm_symbolic draws
    its templates for the whole size), so a draw that falls short starts over with a larger dataset rather
    than extending one; each row's reference records the size."""
    size, rule = count, TEMPLATES.get(task)
    for _ in range(_ROUNDS):
        dataset = gym.task_dataset(task, settings, seed, size)
        rows, taken = [], set(exclude or ())
        for index in range(size):
            row = _row(task, settings, dataset, index, rule, split, style)
            if not keep(row) or (exclude is not None and row["question"] in taken):
                continue
            rows.append(row)
            taken.add(row["question"])
            if len(rows) == count:
                return _Draw(rows, size)
        size *= _GROWTH
    return _Draw(rows, size // _GROWTH)


def _row(task: str, settings: dict[str, Any], dataset: Any, index: int, rule: TemplateRule | None,
         split: str, style: str) -> dict[str, Any]:  # fmt: skip
    entry = dataset[index]
    working = WORKINGS[task](entry, style) if task in WORKINGS else None
    answer = str(entry["answer"]) if entry.get("answer") is not None else ""
    return {
        "question": str(entry["question"]),
        "answer": answer,
        "working": working.text if working else "",
        "working_agrees": working is not None and agrees(working.answer, answer),
        "split": split,
        "task": task,
        "template": rule.template_of(dataset, index) if rule else -1,
        gym.ENTRY_COLUMN: gym.entry_ref(task, settings, dataset.seed, dataset.size, index),
        "difficulty": json.dumps(difficulty(entry), sort_keys=True),
    }


def difficulty(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's own values of the settings its task varies (the keys of ``metadata["difficulty"]`` the
    metadata also holds), e.g. ``{"num_terms": 3, "num_digits": 2}``; ``{}`` for a task that reports none."""
    metadata = entry.get("metadata") or {}
    ranges = metadata.get("difficulty")
    if not isinstance(ranges, dict):  # gsm_symbolic: one number, not the settings
        return {}
    return {key: metadata[key] for key in ranges if isinstance(metadata.get(key), (int, float, str))}


def _check_streams(task: str, train: tuple[int, int], heldout: tuple[int, int]) -> None:
    """Refuse held-out entries drawn from random streams training also drew from."""
    (a, n), (b, m) = train, heldout
    if a < b + m and b < a + n:
        raise DataError(
            f"{gym.PREFIX}{task}: held-out entries (seeds {b}..{b + m - 1}) share random streams with "
            f"training (seeds {a}..{a + n - 1}); leave data.reasoning_gym.eval_seed null or move it at "
            f"least {n} away from the training seed"
        )


def _check_count(task: str, draw: _Draw, wanted: int, what: str, setting: str) -> None:
    if len(draw.rows) < wanted:
        raise DataError(
            f"{gym.PREFIX}{task}: found only {len(draw.rows)} {what} in {draw.size} entries ({setting} "
            f"{wanted}); widen the task's settings (data.reasoning_gym.settings.{task}), change "
            f"data.reasoning_gym.heldout_templates, or lower data.reasoning_gym.{setting}"
        )
