"""Our GRPO trainer: TRL's ``GRPOTrainer`` with the project's training step. The file to open first.

``grpo_trainer_class(GRPOTrainer)`` is a subclass of the trainer class the backend imports (TRL's, or the one
Unsloth compiles in its place) with the hooks below as its methods; ``GRPOPhase`` (``grpo.py``) builds it with
the run's ``StepRecipe``. Nothing is patched on TRL's class or on the trainer object. One training step, in the
order it runs (``_generate_and_score_completions``):

1. **choose prompts** (``draw_prompts``): the sampler's prompts, and ``oversample - 1`` times as many more
   (``oversample.extra_indices``); or every prompt drawn by the curriculum (``curriculum.py``).
2. **generate** (TRL's generation; ``_generate_single_turn``): with guidance, worked solutions in the groups whose
   answers are all wrong (``guidance.py``).
3. **score** (TRL's rewards; ``_calculate_rewards``): and the grader's verdict on every completion.
4. **advantages** (``assign_advantages``): the estimator ``grpo_training.advantages`` names, registered in
   ``rewards/estimators.py``; the group figures of ``advantages.py``.
5. **choose groups** (``choose_groups``): with oversampling, the groups that teach (``oversample.py``); with
   ``drop_silent_groups``, those alone; with ``train_per_group``, the completions of each whose advantages spread
   the most, their advantages estimated again over the kept ones (``downsample.py``). With a KL term, the
   reference log-probs of the kept rows alone (``reference.py``), not of every row generated. With
   ``line_credit``, the kept completions' advantages per token: a wrong answer's right lines carry none
   (``line_credit.py``; the lines read in step 3). With ``negative_weight``, the kept completions' advantages
   below zero scaled (``advantages.py``).
6. **loss** (TRL's loss; ``_compute_loss``, ``_get_per_token_logps_and_entropies``): the importance-sampling
   ratio computed in the loss pass instead of TRL's extra pass (``importance.py``); each group's prompt computed
   once (``shared_prompt.py``). With ``sft_anchor``, SFT's loss on a batch of SFT's own rows added to every
   training loss pass (``compute_loss``, ``anchor.py``).

Evaluation batches (the model in eval mode) take steps 2 to 4 without guidance. The TRL internals overridden here
are listed with their parameters in ``runtime/trl_patches.py``, and ``tests/test_trl_contracts.py`` holds them
against the installed TRL.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..grading.lines import CreditSpan, credit_span
from ..rewards.estimators import ESTIMATORS, Scores
from . import guidance, importance, line_credit, reference, shared_prompt
from .advantages import group_figures, negative_share, teaching_groups, weigh_negatives
from .anchor import AnchorRows, anchor_loss
from .curriculum import Curriculum, CurriculumCheckpoint
from .downsample import widest_rows
from .oversample import chosen_groups, extra_indices, groups_without_silent, kept_rows

__all__ = ["GRPOStep", "StepRecipe", "grpo_trainer_class"]


_SPANS = "line_credit_spans"  # the step's batch carries each row's CreditSpan from scoring to the loss


@dataclass(frozen=True)
class StepRecipe:
    """What a step does beyond TRL's: the ``grpo_training`` choices and the run plan's, decided by ``GRPOPhase``."""

    is_correct: Callable[[str, dict], bool]  # the grader's verdict on a completion of a row (evaluation's judge)
    estimator: str = "gated"  # a name in rewards/estimators.ESTIMATORS
    tie_weight: float = 0.0  # gated: how much the shaping rewards speak where correctness ties
    oversample: int = 1  # prompts generated per prompt trained on
    drop_silent: bool = False  # the step trains on its groups that teach alone, not filled up to a constant batch
    train_per_group: int | None = None  # completions of each group trained on (null: all)
    seed: int = 0  # the oversampled prompts' permutation is seeded with seed + 1
    curriculum: Curriculum | None = None  # draws every prompt of a step when set
    guidance: bool = False  # an all-wrong group's last completion becomes its problem's worked solution
    shared_prompt: bool = False  # log-prob passes compute each group's prompt once
    ratio_in_loss: bool = False  # TRL's loss (not Unsloth's): the importance ratio may come from the loss pass
    line_credit: str | None = None  # a check in grading.lines.LINE_CHECKS: advantages per token
    working_end: str = ""  # the tag that ends the working (line_credit reads the lines before it)
    answer_start: str = ""  # the tag that opens the answer, where the working's end is missing
    anchor: AnchorRows | None = None  # SFT's rows whose SFT loss every training loss pass adds (sft_anchor)
    anchor_weight: float = 0.0  # times that loss
    negative_weight: float = 1.0  # the trained completions' advantages below zero times this

    @property
    def chooses(self) -> bool:
        """Whether a step trains on part of what it generated (step 5)."""
        return self.oversample > 1 or self.drop_silent or self.train_per_group is not None


@functools.cache
def grpo_trainer_class(base: type) -> type:
    """Our trainer over ``base`` (``trl.GRPOTrainer`` as the backend imports it): built with ``recipe=``."""
    return type(f"Project{base.__name__}", (GRPOStep, base), {"__module__": __name__, "__doc__": GRPOStep.__doc__})


class GRPOStep:
    """GRPO's step with the project's hooks (module docstring); mixed in before a ``GRPOTrainer`` class."""

    def __init__(self, *args: Any, recipe: StepRecipe, **kwargs: Any) -> None:
        self.recipe = recipe
        self._rows: list[dict] = []  # the rows being generated for (guidance reads them)
        self._scores: tuple[torch.Tensor, torch.Tensor] | None = None  # rewards, every process's verdicts
        self._batch_scores: Scores | None = None  # the step's, every process's: train_per_group estimates again
        self._loss_inputs: dict | None = None  # the batch whose loss pass computes the importance ratio
        self._spans: list[CreditSpan] = []  # this process's completions', in tokens (line_credit)
        self._anchor_step, self._anchor_pass = -1, 0  # the optimizer step and pass within it of the last anchor batch
        super().__init__(*args, **kwargs)
        self._ratio_in_loss = recipe.ratio_in_loss and importance.applies(self)
        if recipe.curriculum is not None:
            self.add_callback(CurriculumCheckpoint(recipe.curriculum))
        if recipe.guidance:
            guidance.log_available(self.train_dataset)

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict[str, Any]:
        """One step's batch: prompts chosen, generated, scored, advantages assigned, groups chosen."""
        if not self.model.training:
            return self.scored(list(inputs))[0]
        recipe, group = self.recipe, self.num_generations
        prompts = len(inputs) // group
        rows, levels = self.draw_prompts(list(inputs), prompts * recipe.oversample)
        output, correct = self.scored(rows)
        if recipe.curriculum is not None:
            recipe.curriculum.observe(levels, correct.view(-1, group).tolist())
            for name, value in recipe.curriculum.figures(levels).items():
                self._metrics["train"][name].append(value)
        if recipe.line_credit is not None:
            output[_SPANS], self._spans = self._spans, []  # cut with the rows the step keeps
        kept = self.choose_groups(output, prompts) if recipe.chooses else output
        kept["advantages"] = weigh_negatives(kept["advantages"], recipe.negative_weight)
        share = negative_share(self.accelerator.gather(kept["advantages"]))
        self._metrics["train"]["advantages/negative_share"].append(share)
        if recipe.chooses and self.beta != 0.0:
            kept["ref_per_token_logps"] = reference.kept_log_probs(self, kept)
        if recipe.line_credit is not None:
            self.credit_by_line(kept, kept.pop(_SPANS))
        return kept

    # 1. choose prompts
    def draw_prompts(self, inputs: list[dict], count: int) -> tuple[list[dict], list[str]]:
        """This process's ``count`` prompts of the step, each repeated for its group, and (with a curriculum) the
        level of every prompt drawn on every process."""
        recipe, group, dataset = self.recipe, self.num_generations, self.train_dataset
        process, processes = self.accelerator.process_index, self.accelerator.num_processes
        if recipe.curriculum is not None:
            curriculum = recipe.curriculum
            curriculum.resume_from(self.args.output_dir, self.state.global_step)
            everyone = curriculum.draw(count * processes)  # every process draws the same, then takes its slice
            mine = everyone[process * count : (process + 1) * count]
            return [dict(dataset[index]) for index in mine for _ in range(group)], [curriculum.names[i] for i in everyone]
        extra = count - len(inputs) // group
        if extra == 0:
            return inputs, []
        indices = extra_indices(len(dataset), recipe.seed + 1, self.state.global_step, process, processes, extra)
        return inputs + [dict(dataset[index]) for index in indices for _ in range(group)], []

    def scored(self, rows: list[dict]) -> tuple[dict[str, Any], torch.Tensor]:
        """Steps 2 to 4 on ``rows``: TRL's generation and rewards, then our advantages; and every process's
        verdicts (1 right, 0 wrong)."""
        self._rows = rows
        later = self.model.training and self.recipe.chooses  # the reference pass after the choice, on kept rows
        try:
            with self._old_logps_from_loss(), reference.skipped_in_generation(self, later and self.beta != 0.0):
                output = super()._generate_and_score_completions(rows)
        finally:
            self._rows = []
        return self.assign_advantages(output)

    @contextlib.contextmanager
    def _old_logps_from_loss(self) -> Iterator[None]:
        """TRL skips its no-grad "old" log-prob pass where the loss pass computes the ratio (``importance.py``)."""
        if not self._ratio_in_loss:
            yield
            return
        self.vllm_importance_sampling_correction = False
        try:
            yield
        finally:
            self.vllm_importance_sampling_correction = True

    # 2. generate
    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int,
                              has_tool_images: bool = False) -> Any:  # fmt: skip
        completion_ids, logprobs = super()._generate_single_turn(prompt_ids, images, multimodal_fields,
                                                                 num_generations, has_tool_images)  # fmt: skip
        if not (self.recipe.guidance and self.model.training):
            return completion_ids, logprobs
        return guidance.guide_batch(self, completion_ids, logprobs, self._rows, num_generations)

    # 3. score
    def _calculate_rewards(self, inputs: list[dict], prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        verdicts = [float(self.recipe.is_correct(text, row)) for text, row in zip(texts, inputs, strict=True)]
        if self.recipe.line_credit is not None and self.model.training:
            self._spans = self.line_spans(inputs, completion_ids_list)
        self._scores = rewards, self.accelerator.gather(torch.tensor(verdicts, device=rewards.device))
        return rewards

    # 4. advantages
    def assign_advantages(self, output: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor]:
        """The estimator's advantages over every process's groups; this process keeps its slice."""
        assert self._scores is not None, "TRL's generation did not call _calculate_rewards"
        (rewards, correct), self._scores = self._scores, None
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        weights = self.reward_weights.to(rewards.device)
        recipe = self.recipe
        scores = Scores(rewards, weights, correct, group, self.scale_rewards, recipe.tie_weight)
        everyone = ESTIMATORS[recipe.estimator](scores)
        self._batch_scores = scores
        size = len(output["advantages"])
        mine = slice(self.accelerator.process_index * size, (self.accelerator.process_index + 1) * size)
        output["advantages"] = everyone[mine].to(output["advantages"].dtype)
        total = torch.nan_to_num(rewards * weights.unsqueeze(0)).sum(dim=1)
        for name, value in group_figures(correct, total, everyone, group).items():
            self._metrics[mode][name].append(value)
        return output, correct

    # 5. choose groups
    def choose_groups(self, output: dict[str, Any], prompts: int) -> dict[str, Any]:
        """The (at most) ``prompts`` groups the step trains on: those that teach first (``oversample.py``)."""
        group = self.num_generations
        if self.recipe.drop_silent:
            mine = teaching_groups(output["advantages"], group).sum().reshape(1)
            prompts = groups_without_silent(self.accelerator.gather(mine).tolist(), prompts)
        chosen = chosen_groups(output["advantages"], group, prompts)
        advantages, per_group = output["advantages"].tolist(), self.recipe.train_per_group or group
        rows = [g * group + i for g in chosen
                for i in widest_rows(advantages[g * group : (g + 1) * group], per_group)]  # fmt: skip
        kept = kept_rows(output, rows, self.accelerator)
        if per_group < group:
            kept["advantages"] = self.kept_advantages(rows, len(advantages), per_group).to(kept["advantages"].dtype)
        trained = self.accelerator.gather(teaching_groups(kept["advantages"], per_group).float())
        self._metrics["train"]["groups/trained_signal"].append(trained.mean().item())
        self._metrics["train"]["groups/trained"].append(len(chosen))
        self._metrics["train"]["groups/trained_completions"].append(len(rows))
        return kept

    def kept_advantages(self, rows: list[int], size: int, per_group: int) -> torch.Tensor:
        """The estimator's advantages over the kept completions of every process, each kept group as a group of
        ``per_group``; this process's slice (its ``rows`` of its ``size``)."""
        assert self._batch_scores is not None, "choose_groups before assign_advantages"
        scores, process = self._batch_scores, self.accelerator.process_index
        device = scores.correct.device
        everyone = self.accelerator.gather(torch.tensor([process * size + row for row in rows], device=device))
        kept = Scores(scores.rewards[everyone], scores.weights, scores.correct[everyone], per_group, scores.scale,
                      scores.tie_weight)  # fmt: skip
        return ESTIMATORS[self.recipe.estimator](kept)[process * len(rows) : (process + 1) * len(rows)]

    def credit_by_line(self, kept: dict[str, Any], spans: list[CreditSpan]) -> None:
        """The kept completions' advantages per token (``line_credit.py``), and what that moved, logged."""
        advantages, mask = kept["advantages"], kept["completion_mask"]
        for name, value in line_credit.figures(advantages, spans, mask).items():
            self._metrics["train"][name].append(value)
        kept["advantages"] = line_credit.token_advantages(advantages, spans, mask.shape[1])

    def line_spans(self, rows: list[dict], ids: Any) -> list[CreditSpan]:
        """Each completion's checked working lines (step 3), in its tokens."""
        recipe, tokenizer = self.recipe, self.processing_class
        assert recipe.line_credit is not None
        spans = []
        for row, completion in zip(rows, ids, strict=True):
            text = tokenizer.decode(list(completion), skip_special_tokens=True)  # the text the offsets are of
            span = credit_span(text, str(row.get("answer", "")), recipe.line_credit, recipe.working_end,
                               recipe.answer_start)  # fmt: skip
            spans.append(line_credit.in_tokens(span, line_credit.token_ends(completion, text, tokenizer)))
        return spans

    # 6. loss
    def compute_loss(self, model: Any, inputs: dict, return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:  # fmt: skip
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        anchor = self.recipe.anchor
        if anchor is None or not model.training:
            return loss
        sft_loss = anchor_loss(model, anchor.batch(self.anchor_batch_number(), loss.device))
        self._metrics["train"]["sft_anchor/loss"].append(sft_loss.item())
        # TRL's loss is already divided by the accumulation steps; the anchor's the same, so their ratio is the weight
        return loss + self.recipe.anchor_weight * sft_loss / self.current_gradient_accumulation_steps

    def anchor_batch_number(self) -> int:
        """The loss pass's number over the run (optimizer steps x accumulation + the pass within the step): the
        anchor's rows follow from it, so a resumed run draws what the uninterrupted one would have."""
        step, passes = self.state.global_step, self.current_gradient_accumulation_steps
        self._anchor_pass = self._anchor_pass + 1 if self._anchor_step == step else 0
        self._anchor_step = step
        return step * passes + self._anchor_pass

    def _compute_loss(self, model: Any, inputs: dict) -> Any:
        self._loss_inputs = inputs if self._ratio_in_loss else None
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._loss_inputs = None

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        plain = super()._get_per_token_logps_and_entropies
        result = shared_prompt.log_probs(self, plain, *args, **kwargs) if self.recipe.shared_prompt \
            else plain(*args, **kwargs)  # fmt: skip
        inputs = self._loss_inputs
        if inputs is not None and torch.is_grad_enabled() and "importance_sampling_ratio" not in inputs:
            inputs["importance_sampling_ratio"] = importance.ratio_and_metrics(self, result[0].detach(), inputs)
        return result
