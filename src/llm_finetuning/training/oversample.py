"""More prompts generated than a GRPO step trains on, the groups that teach kept first (DAPO's dynamic sampling,
in one round): ``grpo_training.oversample``.

A group whose answers are all right or all wrong has zero advantages under the correctness gate, so it adds
nothing to the step but its cost (and, under the ``dapo`` loss, its tokens to the normaliser, shrinking the step of
the groups that do teach). With ``oversample: k`` each step generates and scores k times its prompts: the ones its
sampler drew, then ``(k - 1)`` times as many drawn here; the step then trains on as many groups as it would have,
those with non-zero advantages first (in the order they were drawn), the rest filled from the groups without.
Generation and the no-grad log-prob passes cost k times as much; the loss pass costs what it did. With
``grpo_training.drop_silent_groups`` the step is not filled: it trains on the groups that teach alone (one silent
group where none does; with several processes, as many as the process with the most has), so its loss pass costs
what they cost and a step's batch varies in size.

The extra prompts come from the same training problems (after any ``difficulty_band`` cut), in a permutation
seeded with ``seed + 1`` and indexed by the step and the process, so a resumed run draws the same ones. Groups stay
within one process (the config requires each process's generation batch to hold whole groups), so each process
chooses among its own. Every step logs ``groups/trained``, the groups it trained on (per process), and
``groups/trained_signal``: the share of them that carry signal (``groups/signal`` is over every group it generated).

With ``grpo_training.curriculum`` every prompt of a step, the sampler's share and the extra ones alike, is drawn
by the curriculum (``curriculum.py``) instead, and each step's groups tell it how they went. The trainer's
``draw_prompts`` and ``choose_groups`` (``grpo_trainer.py``) use the functions here.

    >>> import torch
    >>> chosen_groups(torch.tensor([0., 0., 1., -1., 0., 0., .5, -.5]), group=2, wanted=2)
    [1, 3]
"""

from __future__ import annotations

from typing import Any

import torch

from .advantages import teaching_groups

__all__ = ["chosen_groups", "extra_indices", "groups_without_silent", "kept_rows"]


def chosen_groups(advantages: torch.Tensor, group: int, wanted: int) -> list[int]:
    """The ``wanted`` groups to train on, in batch order: those with non-zero advantages first, then the others."""
    signal = teaching_groups(advantages, group).tolist()
    teaching = [index for index, has in enumerate(signal) if has]
    silent = [index for index, has in enumerate(signal) if not has]
    return sorted((teaching + silent)[:wanted])


def groups_without_silent(teaching: list[int], wanted: int) -> int:
    """How many groups each process trains on when silent groups are dropped, from every process's count of groups
    that teach: the most any process has, at least one, at most ``wanted``. Processes keep batches of one size (TRL
    gathers per-completion figures across them), so a process with fewer fills up with silent groups.

    >>> groups_without_silent([1], 4), groups_without_silent([0, 0], 4), groups_without_silent([3, 1], 2)
    (1, 1, 2)
    """
    return min(wanted, max(1, *teaching))


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
