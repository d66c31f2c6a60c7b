"""How GRPO turns a group's rewards into advantages, and what each group taught: the correctness gate and group
signal.

TRL sums the weighted rewards and normalises the sum within each group (``sum``), or normalises each reward
within the group before summing (``normalize_then_sum``, TRL's ``multi_objective_aggregation``). Either way a
group whose completions are all wrong still gets full-size advantages from the format and number rewards, which
differ between wrong answers: "phantom" advantages that teach whatever the wrong answers that formatted best
have in common (short ones, say). ``gated`` takes the advantages from correctness alone (the math grader's
verdict, the figure evaluation reports): in a group where correctness differs, right answers go up and wrong
ones down, whatever the shaping rewards say; only in a group where correctness ties (all right or all wrong) do
the shaping rewards speak, scaled by ``tie_weight`` (0: such a group teaches nothing).

Whatever the mode, every step logs what its groups carried, per group (TRL's ``frac_reward_zero_std`` is per
batch under ``scale_rewards: batch``): ``groups/signal`` (share of groups whose advantages are not all zero),
``groups/all_right``, ``groups/all_wrong``, ``groups/phantom`` (all wrong, yet with differing rewards: what the
gate removes) and ``groups/correct`` (the share of completions the grader accepts, the training accuracy).

    >>> import torch
    >>> correct = torch.tensor([0., 0., 0., 0., 1., 0., 1., 0.])   # two groups of four
    >>> shaped = torch.tensor([3., 1., 2., 0., 5., 5., 5., 5.])
    >>> gated_advantages(correct, shaped, group=4, scale="group", tie_weight=0.0)[:4].abs().sum().item()
    0.0
"""

from __future__ import annotations

from typing import Any

import torch

from ..runtime.trl_patches import replace_method

__all__ = ["ADVANTAGE_MODES", "gated_advantages", "group_figures", "install", "teaching_groups"]

ADVANTAGE_MODES = ("sum", "normalize_then_sum", "gated")
_EPSILON = 1e-4  # TRL's: a group whose rewards barely differ is not blown up to unit scale


def gated_advantages(correct: torch.Tensor, shaped: torch.Tensor, group: int, scale: str,
                     tie_weight: float) -> torch.Tensor:  # fmt: skip
    """Advantages from ``correct`` (1 right, 0 wrong) where a group's correctness differs; from ``shaped`` (the
    weighted reward sum) times ``tie_weight`` where it ties. ``scale``: TRL's ``scale_rewards`` (group, batch,
    none)."""
    right = correct.view(-1, group).float()
    from_correct = _normalised(right, scale)
    from_shaping = _normalised(shaped.view(-1, group).float(), scale) * tie_weight
    ties = (right.max(dim=1, keepdim=True).values == right.min(dim=1, keepdim=True).values)
    return torch.where(ties, from_shaping, from_correct).reshape(-1)


def _normalised(rewards: torch.Tensor, scale: str) -> torch.Tensor:
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "group":
        return centred / (rewards.std(dim=1, keepdim=True) + _EPSILON)
    if scale == "batch":
        return centred / (rewards.std() + _EPSILON)
    return centred


def teaching_groups(advantages: torch.Tensor, group: int) -> torch.Tensor:
    """Per group of ``group`` consecutive completions, whether any advantage is non-zero (the group teaches)."""
    return advantages.view(-1, group).abs().amax(dim=1) > 1e-6


def group_figures(correct: torch.Tensor, total: torch.Tensor, advantages: torch.Tensor,
                  group: int) -> dict[str, float]:  # fmt: skip
    """What the step's groups carried (module docstring), from the whole generation batch."""
    right = correct.view(-1, group).float()
    spread = total.view(-1, group).float().std(dim=1) > 0
    all_right, all_wrong = right.min(dim=1).values == 1, right.max(dim=1).values == 0
    signal = teaching_groups(advantages, group)
    return {
        "groups/signal": signal.float().mean().item(),
        "groups/all_right": all_right.float().mean().item(),
        "groups/all_wrong": all_wrong.float().mean().item(),
        "groups/phantom": (all_wrong & spread).float().mean().item(),
        "groups/correct": right.mean().item(),
    }


def install(trainer: Any, mode: str, tie_weight: float, is_correct: Any, expose_correct: bool = False) -> None:
    """Give ``trainer`` (a TRL GRPOTrainer) the group figures, and under ``gated`` the gated advantages.
    ``is_correct(completion_text, row) -> bool`` is evaluation's verdict (the row's task judges it). With
    ``expose_correct`` a training batch's output also carries ``correct`` (this process's verdicts, 1 or 0), for
    the curriculum, which takes it out before TRL sees the batch."""
    calculate, generate = trainer._calculate_rewards, trainer._generate_and_score_completions
    kept: dict[str, torch.Tensor] = {}

    def calculate_and_keep(self: Any, inputs: Any, prompts: Any, completions: Any, completion_ids: Any) -> Any:
        rewards = calculate(inputs, prompts, completions, completion_ids)
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        local = torch.tensor([float(is_correct(text, row)) for text, row in zip(texts, inputs, strict=True)],
                             device=rewards.device)  # fmt: skip
        kept["rewards"], kept["correct"] = rewards, self.accelerator.gather(local)
        return rewards

    def generate_with_groups(self: Any, inputs: Any) -> Any:
        out = generate(inputs)
        mode_name = "train" if self.model.training else "eval"
        group = self.num_generations if mode_name == "train" else self.num_generations_eval
        rewards, correct = kept.pop("rewards"), kept.pop("correct")
        weights = self.reward_weights.to(rewards.device)
        total = torch.nan_to_num(rewards * weights.unsqueeze(0)).sum(dim=1)
        everyone = self.accelerator.gather(out["advantages"])
        if mode == "gated":
            everyone = gated_advantages(correct, total, group, self.scale_rewards, tie_weight)
            start = self.accelerator.process_index * len(out["advantages"])
            out["advantages"] = everyone[start : start + len(out["advantages"])].to(out["advantages"].dtype)
        for name, value in group_figures(correct, total, everyone, group).items():
            self._metrics[mode_name][name].append(value)
        if expose_correct and mode_name == "train":
            start = self.accelerator.process_index * len(out["advantages"])
            out["correct"] = correct[start : start + len(out["advantages"])]
        return out

    replace_method(trainer, "_calculate_rewards", calculate_and_keep)
    replace_method(trainer, "_generate_and_score_completions", generate_with_groups)
