"""Offline arithmetic word problems (``synthetic:arithmetic``): the data behind the CPU demo.

Why: the demo must run with no network, and GRPO needs a task a ~1M-parameter model solves about half the
time after SFT. Difficulty is tuned through ``SyntheticDataConfig``: operand range,
operations, operations per problem, the share of story-style questions, and the share of held-out tuples.

A problem is an (operands, operations) tuple rendered either bare ("What is 3 + 4?") or as a story ("Tom
has 3 apples. He finds 4 more. ..."); the bare question adds parentheses where precedence would differ.
The working (``working``) is evaluated left to right, either one line per operation ("7 + 5 = 12\\n12 - 3
= 9") or column by column with the carry written out ("7+5+0=12\\n=12", see ``tasks.workings.column_working``): with
columns, a sum never seen is a chain of single-digit steps seen many times.

What is held out (``heldout_by``):
  ``tuples``   a seeded hash assigns each whole tuple to training or evaluation, so a held-out problem is
               unseen in every phrasing (a sum or product of two numbers in either order): it tests
               arithmetic the model never saw.
  ``wording``  a seeded ~20 % of the (name, item) pairings ("Tom" with "coins") never occur in training;
               held-out problems are word problems with those pairings over the same facts as training:
               they test reading a new story, not knowing a new sum. Bare questions are always training.
  ``both``     held-out problems are stories with a held-out pairing over a held-out tuple: new arithmetic,
               newly worded (the demo's setting).
With single-digit sums, holding out whole operand tuples means the model never saw the fact and GRPO cannot
teach it (held-out accuracy +4 points); two-digit operands with column working are what make held-out
tuples learnable (docs/benchmarks.md).

Raw rows: ``question``, ``answer`` (the integer as a string), ``solution`` (the working), ``split``
("train" | "eval"), ``kind`` ("word" | "bare"), ``operations`` (e.g. "+ -"), ``operands`` (list of ints).
Training rows come first, then ``num_eval`` held-out rows with distinct questions.

    >>> from llm_finetuning.config import SyntheticDataConfig
    >>> rows = generate_arithmetic(SyntheticDataConfig(num_train=5, num_eval=2), seed=0)
    >>> sorted(set(rows["split"]))
    ['eval', 'train']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..config import SyntheticDataConfig
from ..errors import DataError
from ..tasks.workings import column_working

if TYPE_CHECKING:
    from datasets import Dataset

    from ..config import PromptConfig

__all__ = ["GENERATORS", "generate_arithmetic", "heldout_pairings", "tokenizer_corpus"]

_OPERATIONS = ("+", "-", "*")
_NAMES = (("Tom", "He"), ("Sara", "She"), ("Ali", "He"), ("Mia", "She"), ("Ben", "He"), ("Lena", "She"))
_ITEMS = ("apples", "coins", "marbles", "stickers", "books", "pencils")
_STEPS = {
    "+": ("{pron} gets {n} more.", "{pron} finds {n} more {item}.", "{pron} buys {n} more {item}."),
    "-": ("{pron} gives away {n}.", "{pron} loses {n} {item}.", "{pron} sells {n} of them."),
    "*": ("Then the number of {item} grows {n} times.",),
}
_MAX_ROUNDS = 50  # draws of candidate tuples before giving up on a too-small problem space
_HELDOUT_PAIRING_SHARE = 0.2  # heldout_by = "wording": share of (name, item) pairings kept out of training


def generate_arithmetic(cfg: SyntheticDataConfig, seed: int) -> Dataset:
    """Generate ``cfg.num_train`` training rows then ``cfg.num_eval`` held-out rows; same seed, same rows."""
    from datasets import Dataset

    rng = np.random.default_rng(seed)
    rows = _draw_rows(cfg, rng, seed, heldout=False, count=cfg.num_train)
    rows += _draw_rows(cfg, rng, seed, heldout=True, count=cfg.num_eval, training=rows)
    columns = {key: [row[key] for row in rows] for key in _COLUMNS}
    return Dataset.from_dict(columns)


_COLUMNS = ("question", "answer", "solution", "split", "kind", "operations", "operands")
GENERATORS = {"arithmetic": generate_arithmetic}  # synthetic:<name> -> generator(cfg, seed) -> Dataset


def tokenizer_corpus(cfg: SyntheticDataConfig, seed: int, prompt: PromptConfig | None = None) -> list[str]:
    """Texts covering everything the demo shows a tokenizer: every template word, questions, working, answers.

    Built from training problems and the template vocabulary only (no held-out question); with ``prompt``
    the four tags and the system prompt are added too, the prompt once per problem as every conversation
    carries it: the merges then go where the model's text is, and each example is shorter (faster training).
    """
    texts = [" ".join(str(d) for d in range(10)) + " " + " ".join(_OPERATIONS) + " = ( ) ?"]
    for name, pron in _NAMES:
        for item in _ITEMS:
            steps = " ".join(
                step.format(pron=pron, n=3, item=item) for ops in _STEPS.values() for step in ops
            )
            texts.append(f"{name} has 3 {item}. {steps} How many {item} does {name} have now?")
    sample = generate_arithmetic(cfg, seed)[: min(cfg.num_train, 2000)]  # training rows come first
    for question, solution, answer in zip(sample["question"], sample["solution"], sample["answer"]):
        texts += [question, solution, answer]
    if prompt is not None:
        tags = [prompt.reasoning_start, prompt.reasoning_end, prompt.solution_start, prompt.solution_end]
        texts += [" ".join(tags), *[prompt.system_prompt] * len(sample["question"])]
    return texts


def _draw_rows(
    cfg: SyntheticDataConfig,
    rng: np.random.Generator,
    seed: int,
    *,
    heldout: bool,
    count: int,
    training: list[dict] | None = None,
) -> list[dict]:
    """Draw problems on the requested side of the held-out rule and render them. Held-out questions are
    distinct and never among the ``training`` rows' questions; in ``wording`` mode they reuse training facts."""
    rows: list[dict] = []
    seen = {row["question"] for row in training or []}
    pairings, word_share = _pairings_and_word_share(cfg, seed, heldout)
    for _ in range(_MAX_ROUNDS):
        if len(rows) >= count:
            break
        batch = _draw_batch(cfg, rng, 2 * (count - len(rows)) + 16, pairings, word_share)
        if heldout and cfg.heldout_by == "wording":
            _reuse_facts(batch, training or [], rng)
        keep = _valid(batch["operands"], batch["ops"], cfg.allow_negative)
        if cfg.heldout_by in ("tuples", "both"):
            keep &= _is_heldout(batch["operands"], batch["ops"], seed, cfg.eval_fraction_of_tuples) == heldout
        for index in np.flatnonzero(keep).tolist():
            if len(rows) == count:
                break
            row = _render({key: column[index] for key, column in batch.items()}, cfg.working)
            if heldout and row["question"] in seen:
                continue
            seen.add(row["question"])
            rows.append({**row, "split": "eval" if heldout else "train"})
    if len(rows) < count:
        side = "held-out" if heldout else "training"
        raise DataError(
            f"data.synthetic: found only {len(rows)} of {count} {side} problems in this problem space; widen "
            "min_operand..max_operand or add operations, or lower num_eval / adjust eval_fraction_of_tuples"
        )
    return rows


def _reuse_facts(batch: dict[str, np.ndarray], training: list[dict], rng: np.random.Generator) -> None:
    """Replace the batch's drawn tuples with tuples of random training rows: held-out facts are known facts."""
    chosen = rng.integers(0, len(training), size=len(batch["operands"]))
    batch["operands"] = np.array([training[i]["operands"] for i in chosen.tolist()], dtype=np.int64)
    batch["ops"] = np.array(
        [[_OPERATIONS.index(op) for op in training[i]["operations"].split()] for i in chosen]
    )


def heldout_pairings(seed: int) -> set[tuple[str, str]]:
    """The (name, item) pairings ``heldout_by = "wording"`` keeps out of training: ~20 %, at least one."""
    count = max(1, round(_HELDOUT_PAIRING_SHARE * len(_NAMES) * len(_ITEMS)))
    chosen = np.random.default_rng([seed, 0x5EED]).choice(
        len(_NAMES) * len(_ITEMS), size=count, replace=False
    )
    return {(_NAMES[i // len(_ITEMS)][0], _ITEMS[i % len(_ITEMS)]) for i in chosen.tolist()}


def _pairings_and_word_share(cfg: SyntheticDataConfig, seed: int, heldout: bool) -> tuple[np.ndarray, float]:
    """Pairing ids (name * len(_ITEMS) + item) a side may use, and its share of word problems."""
    everything = np.arange(len(_NAMES) * len(_ITEMS))
    if cfg.heldout_by == "tuples":
        return everything, cfg.word_problem_fraction
    names = [name for name, _ in _NAMES]
    held = np.array(sorted(names.index(n) * len(_ITEMS) + _ITEMS.index(i) for n, i in heldout_pairings(seed)))
    if heldout:
        return held, 1.0
    return np.setdiff1d(everything, held), cfg.word_problem_fraction


def _draw_batch(
    cfg: SyntheticDataConfig, rng: np.random.Generator, n: int, pairings: np.ndarray, word_share: float
) -> dict[str, np.ndarray]:
    """Candidate tuples plus every random choice their rendering needs, drawn as arrays (fast)."""
    symbols = np.array([_OPERATIONS.index(op) for op in cfg.operations])
    k = cfg.num_operations
    pairing = pairings[rng.integers(0, len(pairings), size=n)]
    return {
        "operands": rng.integers(cfg.min_operand, cfg.max_operand + 1, size=(n, k + 1)),
        "ops": symbols[rng.integers(0, len(symbols), size=(n, k))],  # indices into _OPERATIONS
        "word": rng.random(n) < word_share,
        "name": pairing // len(_ITEMS),
        "item": pairing % len(_ITEMS),
        "phrasing": rng.integers(0, 6, size=(n, k)),  # taken modulo the number of phrasings of each step
    }


def _valid(operands: np.ndarray, ops: np.ndarray, allow_negative: bool) -> np.ndarray:
    """Rows whose left-to-right working never goes below zero (all rows when negatives are allowed)."""
    if allow_negative:
        return np.ones(len(operands), dtype=bool)
    value = operands[:, 0].copy()
    ok = value >= 0
    for step in range(ops.shape[1]):
        operand = operands[:, step + 1]
        value = np.select(
            [ops[:, step] == 0, ops[:, step] == 1], [value + operand, value - operand], value * operand
        )
        ok &= value >= 0
    return ok


def _is_heldout(operands: np.ndarray, ops: np.ndarray, seed: int, fraction: float) -> np.ndarray:
    """A seeded splitmix64 hash of the whole tuple: the same tuple is on the same side in every phrasing.
    A sum or product of two numbers is one problem in either order (``3 + 4`` and ``4 + 3`` share a side)."""
    key = operands.copy()
    if ops.shape[1] == 1:
        commutes = ops[:, 0] != _OPERATIONS.index("-")
        key[commutes] = np.sort(key[commutes], axis=1)
    h = np.full(len(operands), seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    for column in np.concatenate([key, ops + 1_000_003], axis=1).T:
        h = _splitmix64(h ^ column.astype(np.int64).astype(np.uint64))
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53) < fraction


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _render(choice: dict, working: str = "lines") -> dict:
    values, ops = choice["operands"].tolist(), [_OPERATIONS[i] for i in choice["ops"].tolist()]
    lines, expression, total = [], str(values[0]), values[0]
    for op, operand in zip(ops, values[1:]):
        result = total + operand if op == "+" else total - operand if op == "-" else total * operand
        if working == "columns":
            lines += column_working(total, op, operand)
        else:
            lines.append(f"{total} {op} {operand} = {result}")
        if op == "*" and (" + " in expression or " - " in expression):
            expression = f"({expression})"
        expression, total = f"{expression} {op} {operand}", result
    word = bool(choice["word"])
    return {
        "question": _story(values, ops, choice) if word else f"What is {expression}?",
        "answer": str(total),
        "solution": "\n".join(lines),
        "kind": "word" if word else "bare",
        "operations": " ".join(ops),
        "operands": values,
    }


def _story(values: list[int], ops: list[str], choice: dict) -> str:
    name, pron = _NAMES[choice["name"]]
    item = _ITEMS[choice["item"]]
    sentences = [f"{name} has {values[0]} {item}."]
    for op, operand, phrasing in zip(ops, values[1:], choice["phrasing"].tolist()):
        phrasings = _STEPS[op]
        sentences.append(phrasings[phrasing % len(phrasings)].format(pron=pron, n=operand, item=item))
    sentences.append(f"How many {item} does {name} have now?")
    return " ".join(sentences)
