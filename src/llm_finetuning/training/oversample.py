"""More prompts generated than a GRPO step trains on, the groups that teach kept first (DAPO's dynamic sampling,
in one round): ``grpo_training.oversample``.

A group whose answers are all right or all wrong has zero advantages under the correctness gate, so it adds
nothing to the step but its cost (and, under the ``dapo`` loss, its tokens to the normaliser, shrinking the step of
the groups that do teach). With ``oversample: k`` each step generates and scores k times its prompts: the ones its
sampler drew, then ``(k - 1)`` times as many drawn here; the step then trains on as many groups as it would have,
those with non-zero advantages first (in the order they were drawn), the rest filled from the groups without.
Generation and the no-grad log-prob passes cost k times as much; the loss pass costs what it did.

The extra prompts come from the same training problems (after any ``difficulty_band`` cut), in a permutation
seeded with ``seed + 1`` and indexed by the step and the process, so a resumed run draws the same ones. Groups stay
within one process (the config requires each process's generation batch to hold whole groups), so each process
chooses among its own. Every step logs ``groups/trained_signal``: the share of the groups it trained on that
carry signal (``groups/signal`` is over every group it generated).

With ``grpo_training.curriculum`` every prompt of a step, the sampler's share and the extra ones alike, is drawn
by the curriculum (``curriculum.py``) instead, and each step's groups tell it how they went; this is where it is
installed, with or without oversampling.

    >>> import torch
    >>> chosen_groups(torch.tensor([0., 0., 1., -1., 0., 0., .5, -.5]), group=2, wanted=2)
    [1, 3]
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from ..runtime.trl_patches import replace_method
from .advantages import teaching_groups
from .curriculum import STATE_FILE, Curriculum

__all__ = ["chosen_groups", "extra_indices", "install", "kept_rows"]

logger = logging.getLogger(__name__)


def chosen_groups(advantages: torch.Tensor, group: int, wanted: int) -> list[int]:
    """The ``wanted`` groups to train on, in batch order: those with non-zero advantages first, then the others."""
    signal = teaching_groups(advantages, group).tolist()
    teaching = [index for index, has in enumerate(signal) if has]
    silent = [index for index, has in enumerate(signal) if not has]
    return sorted((teaching + silent)[:wanted])


def extra_indices(size: int, seed: int, step: int, process: int, processes: int, count: int) -> list[int]:
    """The ``count`` training problems this process adds at ``step``: consecutive entries of one seeded permutation
    of the ``size`` problems, so every (step, process) pair draws its own and a resumed run draws the same."""
    order = torch.randperm(size, generator=torch.Generator().manual_seed(seed))
    start = (step * processes + process) * count
    return [int(order[(start + offset) % size]) for offset in range(count)]


def kept_rows(output: dict[str, Any], rows: list[int], accelerator: Any) -> dict[str, Any]:
    """``output`` (TRL's scored generation batch) cut to ``rows``; ``num_items_in_batch`` (the loss's normaliser
    under dapo, over every process) counted again over what is kept."""
    total = output["advantages"].shape[0]
    index = torch.tensor(rows, device=output["advantages"].device)
    kept: dict[str, Any] = {}
    for name, value in output.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == total:
            kept[name] = value.index_select(0, index.to(value.device))
        elif isinstance(value, list) and len(value) == total:
            kept[name] = [value[row] for row in rows]
        else:
            kept[name] = value
    mask = kept["completion_mask"] if kept.get("tool_mask") is None else kept["completion_mask"] * kept["tool_mask"]
    kept["num_items_in_batch"] = accelerator.gather(mask.sum()).sum()
    return kept


def install(trainer: Any, factor: int, seed: int, curriculum: Curriculum | None = None) -> None:
    """Generate ``factor`` times the prompts of each training step and keep the groups that teach (module
    docstring); with a ``curriculum``, every prompt of the step is its draw (``curriculum.py``) instead of the
    sampler's and the permutation's. Installed after ``advantages.install`` (with ``expose_correct`` when there is
    a curriculum): the choice reads the advantages the run uses."""
    generate = trainer._generate_and_score_completions
    if curriculum is not None:
        trainer.add_callback(CurriculumCheckpoint(curriculum))

    def generate_and_choose(self: Any, inputs: Any) -> Any:
        if not self.model.training:
            return generate(inputs)
        group = self.num_generations
        prompts = len(inputs) // group
        dataset = self.train_dataset
        if curriculum is None:
            extra = extra_indices(len(dataset), seed + 1, self.state.global_step, self.accelerator.process_index,
                                  self.accelerator.num_processes, prompts * (factor - 1))  # fmt: skip
            rows = list(inputs) + [dict(dataset[index]) for index in extra for _ in range(group)]
            output = generate(rows)
        else:
            output = _generate_drawn(self, generate, curriculum, prompts * factor)
        if factor == 1:
            return output
        chosen = chosen_groups(output["advantages"], group, prompts)
        kept = kept_rows(output, [g * group + i for g in chosen for i in range(group)], self.accelerator)
        trained = self.accelerator.gather(teaching_groups(kept["advantages"], group).float()).mean().item()
        self._metrics["train"]["groups/trained_signal"].append(trained)
        return kept

    replace_method(trainer, "_generate_and_score_completions", generate_and_choose)


def _generate_drawn(trainer: Any, generate: Any, curriculum: Curriculum, count: int) -> dict[str, Any]:
    """Generate and score ``count`` problems of this process drawn by the curriculum, and tell it how every
    process's groups went. Each process draws the whole step from the same state and takes its own slice."""
    if curriculum.draws == 0 and trainer.state.global_step > 0:  # resumed: the state its checkpoint saved
        folder = Path(trainer.args.output_dir) / f"checkpoint-{trainer.state.global_step}"
        if not curriculum.load(folder):
            logger.warning("GRPO curriculum: %s has no %s; its estimates start again", folder, STATE_FILE)
    group, process = trainer.num_generations, trainer.accelerator.process_index
    everyone = curriculum.draw(count * trainer.accelerator.num_processes)
    mine = everyone[process * count : (process + 1) * count]
    output = generate([dict(trainer.train_dataset[index]) for index in mine for _ in range(group)])
    correct = trainer.accelerator.gather(output.pop("correct")).view(-1, group).tolist()
    levels = [curriculum.names[index] for index in everyone]
    curriculum.observe(levels, correct)
    for name, value in curriculum.figures(levels).items():
        trainer._metrics["train"][name].append(value)
    return output


class CurriculumCheckpoint(TrainerCallback):
    """Saves the curriculum's state in each checkpoint folder (the main process), before it is marked complete."""

    def __init__(self, curriculum: Curriculum) -> None:
        self.curriculum = curriculum

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            self.curriculum.save(folder)
