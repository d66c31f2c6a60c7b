"""Each GRPO step's problems drawn where the policy is learning: ``grpo_training.curriculum``.

Under the correctness gate a group teaches only when it holds right and wrong answers; problems the policy always
or never solves cost a step's generation and train nothing. The training problems fall into levels by their
difficulty (a reasoning-gym task's own settings, the ``difficulty`` column: ``num_digits=2,num_terms=4``; MATH's
``level``; else the kind of problem, ``subject``: the demo's operations). For each level the curriculum keeps the last ``curriculum_window`` groups it drew there: how many held
both right and wrong answers (the level's signal) and the share of right answers (its pass rate). Each prompt of a
step picks its level with probability proportional to ``(mixed + 1) / (groups + 2)``: a level not yet tried
counts as one half, a level whose recent groups all agreed keeps a small share, so its estimate still moves as the
policy does. Within a level the problems come in a seeded permutation, each once before any comes again: fresh
problems every step. The curriculum moves on by itself: as a level is mastered its groups agree (all right) and
its share falls, while a level that starts to be solved sometimes gains.

Every process draws the whole step's prompts from the same state (updated from every process's groups) and
takes its own slice, so the processes never disagree. The state is saved beside each checkpoint
(``curriculum.json``) and read back when a run resumes from it. Every step logs, per level,
``curriculum/pass_rate/<level>`` and ``curriculum/drawn/<level>`` (its share of the step's prompts).

    >>> c = Curriculum(['{"n": 2}', '{"n": 3}', '{"n": 2}', '{"n": 3}'], window=4, seed=0)
    >>> c.weights()
    [0.5, 0.5]
    >>> c.observe(["n=2", "n=2"], [[1.0, 0.0], [1.0, 1.0]])
    >>> c.weights()
    [0.5, 0.5]
    >>> c.observe(["n=3"], [[0.0, 0.0]])
    >>> [round(w, 3) for w in c.weights()]
    [0.5, 0.333]
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from ..errors import PipelineError
from ..runtime.atomic_io import write_json_atomic

__all__ = ["LEVEL_COLUMNS", "Curriculum", "CurriculumCheckpoint", "level_name"]

logger = logging.getLogger(__name__)

LEVEL_COLUMNS = ("difficulty", "level", "subject")  # a reasoning-gym task's settings; MATH's level; else a kind of problem
STATE_FILE = "curriculum.json"


def level_name(value: Any) -> str:
    """A level's name from its row's value: ``num_digits=2,num_terms=4`` for a JSON object, else the value."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            settings = json.loads(value)
        except json.JSONDecodeError:
            return value
        return ",".join(f"{key}={settings[key]}" for key in sorted(settings))
    return str(value)


class Curriculum:
    """Levels of the training problems, what each level's recent groups showed, and the draw (module docstring).
    ``values``: each training problem's level value, in dataset order."""

    def __init__(self, values: Sequence[Any], window: int, seed: int) -> None:
        names = [level_name(value) for value in values]
        self.names = names  # each row's level
        self.levels = sorted(set(names))
        self.window, self.seed = window, seed
        generator = torch.Generator().manual_seed(seed)
        members: dict[str, list[int]] = {level: [] for level in self.levels}
        for index, name in enumerate(names):
            members[name].append(index)
        self.order = {level: [members[level][int(i)] for i in torch.randperm(len(members[level]), generator=generator)]
                      for level in self.levels}  # fmt: skip
        self.cursor = dict.fromkeys(self.levels, 0)
        self.recent: dict[str, deque[tuple[bool, float]]] = {level: deque(maxlen=window) for level in self.levels}
        self.draws = 0  # steps drawn so far: the draw's seed moves with it, so a resumed run draws what it would have

    @classmethod
    def of(cls, dataset: Any, window: int, seed: int) -> Curriculum:
        """The curriculum over a datasets.Dataset's rows, by its first column of ``LEVEL_COLUMNS``."""
        column = next((name for name in LEVEL_COLUMNS if name in dataset.column_names), None)
        if column is None:
            raise PipelineError(
                "grpo_training.curriculum: the GRPO problems have no difficulty or level column to draw by; use "
                "problems that say how hard they are (reasoning_gym, MATH) or set curriculum: false"
            )
        curriculum = cls(dataset[column], window, seed)
        logger.info("GRPO curriculum over %d levels of %s: %s", len(curriculum.levels), column,
                    ", ".join(f"{level} ({len(curriculum.order[level])})" for level in curriculum.levels))  # fmt: skip
        return curriculum

    def weights(self) -> list[float]:
        """Each level's draw weight, in ``levels`` order: (groups with mixed answers + 1) / (groups + 2)."""
        return [(sum(mixed for mixed, _ in self.recent[level]) + 1) / (len(self.recent[level]) + 2)
                for level in self.levels]  # fmt: skip

    def pass_rates(self) -> dict[str, float]:
        """Each tried level's share of right answers over its recent groups."""
        return {level: sum(rate for _, rate in groups) / len(groups)
                for level, groups in self.recent.items() if groups}  # fmt: skip

    def draw(self, count: int) -> list[int]:
        """The next ``count`` problems (dataset indices), each from a level drawn by weight; advances the state
        identically in every process."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.draws)
        picks = torch.multinomial(torch.tensor(self.weights()), count, replacement=True, generator=generator)
        self.draws += 1
        chosen = []
        for pick in picks.tolist():
            level = self.levels[pick]
            order = self.order[level]
            chosen.append(order[self.cursor[level] % len(order)])
            self.cursor[level] += 1
        return chosen

    def observe(self, levels: Sequence[str], groups: Sequence[Sequence[float]]) -> None:
        """Record groups drawn at ``levels``: each group's correctness (1 right, 0 wrong) per completion."""
        for level, answers in zip(levels, groups, strict=True):
            right = sum(answers) / len(answers)
            self.recent[level].append((0 < right < 1, right))

    def figures(self, drawn: Sequence[str]) -> dict[str, float]:
        """What a step logs: each level's recent pass rate and its share of ``drawn`` (this step's levels)."""
        result = {f"curriculum/pass_rate/{level}": rate for level, rate in self.pass_rates().items()}
        for level in self.levels:
            result[f"curriculum/drawn/{level}"] = sum(name == level for name in drawn) / max(len(drawn), 1)
        return result

    def state(self) -> dict[str, Any]:
        return {"draws": self.draws, "cursor": self.cursor,
                "recent": {level: [list(group) for group in groups] for level, groups in self.recent.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        if set(state.get("cursor", {})) != set(self.levels):
            logger.warning("curriculum state is of other problems' levels; starting it again")
            return
        self.draws, self.cursor = int(state["draws"]), {level: int(n) for level, n in state["cursor"].items()}
        for level, groups in state["recent"].items():
            self.recent[level] = deque(((bool(mixed), float(rate)) for mixed, rate in groups), maxlen=self.window)

    def save(self, folder: Path) -> None:
        write_json_atomic(folder / STATE_FILE, self.state())

    def load(self, folder: Path) -> bool:
        """Read the state saved in a checkpoint ``folder``; False when it has none."""
        path = folder / STATE_FILE
        if not path.is_file():
            return False
        self.restore(json.loads(path.read_text()))
        return True

    def resume_from(self, output_dir: str | Path, step: int) -> None:
        """On a run's first draw at ``step`` > 0 (resumed), the state its checkpoint there saved."""
        if self.draws == 0 and step > 0:
            folder = Path(output_dir) / f"checkpoint-{step}"
            if not self.load(folder):
                logger.warning("GRPO curriculum: %s has no %s; its estimates start again", folder, STATE_FILE)


class CurriculumCheckpoint(TrainerCallback):
    """Saves the curriculum's state in each checkpoint folder (the main process), before it is marked complete."""

    def __init__(self, curriculum: Curriculum) -> None:
        self.curriculum = curriculum

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            self.curriculum.save(folder)
