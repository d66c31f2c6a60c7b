"""Why is GRPO not learning? Sample groups the way GRPO does and measure what its advantages are made of.

Loads base + adapter (``<output_dir>/sft/final`` by default: what GRPO starts from), takes ``--num`` prompts
from the GRPO validation split (or ``--prompt TEXT``), generates ``num_generations`` completions each with the
config's GRPO sampling settings, and reports per prompt and overall: the share of distinct completions, their
mean pairwise similarity, which tags they contain, each reward's mean and std, the share of groups whose
total reward has zero std (no learning signal) and the truncation rate. Hints name the likely cause.

    uv run python debug_grpo.py --config configs/tiny.yaml
    uv run python debug_grpo.py --config configs/tiny.yaml --json --set grpo_training.temperature=0.3
    uv run python debug_grpo.py --prompt "What is 15 * 23?" --answer 345 --adapter outputs/grpo_saved_lora
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..errors import PipelineError
from . import common
from .group_stats import group_figures, overall_figures
from .train import add_config_arguments, command

__all__ = ["HINTS", "diagnose", "hints", "main", "render_table"]

LOW_TEMPERATURE = 0.5  # below this a small model's K samples mostly coincide
LOW_DIVERSITY = 0.5  # fewer distinct completions than half the group: advantages rest on a few samples
TAGS_EXPECTED = 0.8  # after SFT nearly every completion should carry each tag
CONSTANT_REWARDS = 0.5  # half the groups without reward spread: half of each batch teaches nothing
TRUNCATED = 0.2  # a fifth of completions cut at the budget: the answer tags never get written
PHANTOM = 0.2  # a fifth of groups all wrong yet rewarded differently: GRPO pushes wrong answers up
ALL_WRONG = 0.5  # half the groups without one right answer: correctness teaches nothing there


@dataclass(frozen=True)
class HintContext:
    """What the hints need besides the figures."""

    temperature: float
    num_generations: int
    max_new_tokens: int
    trained: bool  # an adapter was loaded (so the tags should be there)
    advantages: str = "sum"  # grpo_training.advantages
    truncation: str = ""  # the sampling filters on (min_p, top_p, top_k), as the config names them; "" = none


def _low_temperature(overall: dict, ctx: HintContext) -> str | None:
    if ctx.temperature >= LOW_TEMPERATURE:
        return None
    return (
        f"temperature {ctx.temperature} is too low for GRPO: the group's samples barely differ; "
        "raise grpo_training.temperature to about 1.0"
    )


def _identical(overall: dict, ctx: HintContext) -> str | None:
    if overall["distinct"] <= 1 / ctx.num_generations + 1e-9:
        return (
            "all completions of every group are identical: advantages are 0 and GRPO cannot learn; raise "
            "the temperature (or lower min_p) and check that sampling is on"
        )
    if overall["distinct"] < LOW_DIVERSITY:
        return (
            f"only {overall['distinct']:.0%} of completions are distinct: little to compare within a group; "
            "raise the temperature or num_generations"
        )
    return None


def _tags_missing(overall: dict, ctx: HintContext) -> str | None:
    missing = {tag: share for tag, share in overall["tags"].items() if share < TAGS_EXPECTED}
    if not missing:
        return None
    shares = ", ".join(f"{tag} in {share:.0%}" for tag, share in missing.items())
    fix = (
        "SFT has not taught the format: train SFT longer or check --adapter"
        if ctx.trained
        else "no adapter loaded: run SFT first so the format rewards have something to reward"
    )
    return f"tags missing ({shares} of completions); {fix}"


def _constant_rewards(overall: dict, ctx: HintContext) -> str | None:
    if overall["zero_std_groups"] < CONSTANT_REWARDS:
        return None
    return (
        f"{overall['zero_std_groups']:.0%} of groups have rewards with zero std (no learning signal): make "
        "completions differ (temperature) or use graded rewards (check_numbers, match_format_approximately)"
    )


def _truncated(overall: dict, ctx: HintContext) -> str | None:
    if overall["truncation_rate"] < TRUNCATED:
        return None
    return (
        f"{overall['truncation_rate']:.0%} of completions hit the {ctx.max_new_tokens}-token limit before "
        "ending: raise grpo_training.max_completion_length (or model.max_seq_length)"
    )


def _phantom(overall: dict, ctx: HintContext) -> str | None:
    if ctx.advantages == "gated" or overall.get("phantom_groups", 0) < PHANTOM:
        return None
    return (
        f"{overall['phantom_groups']:.0%} of groups have no right answer yet rewards that differ (format and number "
        "rewards): GRPO pushes the wrong answers that scored best up (phantom advantages); set "
        "grpo_training.advantages: gated, or keep only rewards that score correctness"
    )


def _all_wrong(overall: dict, ctx: HintContext) -> str | None:
    if overall.get("all_wrong_groups", 0) < ALL_WRONG:
        return None
    return (
        f"{overall['all_wrong_groups']:.0%} of groups have no right answer (training accuracy "
        f"{overall['correct']:.0%}): correctness teaches nothing there; train on problems the model sometimes "
        "solves (grpo_training.difficulty_band), give such groups the worked solution (grpo_training.guidance), "
        "or train SFT longer"
    )


def _truncated_sampling(overall: dict, ctx: HintContext) -> str | None:
    if not ctx.truncation:
        return None
    return (
        f"rollouts sample from a truncated distribution ({ctx.truncation}) that the loss does not replay: GRPO "
        "treats them as samples of the whole one; set grpo_training.min_p: 0, top_p: 1.0, top_k: -1 for rollouts "
        "(evaluation.sampling keeps its own)"
    )


HINTS: dict[str, Callable[[dict, HintContext], str | None]] = {
    "low_temperature": _low_temperature,
    "identical_completions": _identical,
    "tags_missing": _tags_missing,
    "constant_rewards": _constant_rewards,
    "truncated": _truncated,
    "phantom_advantages": _phantom,
    "all_wrong_groups": _all_wrong,
    "truncated_sampling": _truncated_sampling,
}


def hints(overall: dict[str, Any], ctx: HintContext) -> list[dict[str, str]]:
    """Every hint whose check fires, as ``{"id", "message"}``."""
    found = ((name, check(overall, ctx)) for name, check in HINTS.items())
    return [{"id": name, "message": message} for name, message in found if message]


def load_problems(
    config: PipelineConfig, tokenizer: Any, num: int, prompts: Sequence[str], answers: Sequence[str]
) -> tuple[list[dict[str, Any]], int | None]:
    """``(problem rows, computed completion budget)``: ``--prompt`` texts (with their ``--answer``) or validation
    rows, each with its ``prompt`` (the conversation), ``answer`` and the columns its task and rewards read."""
    if prompts:
        if answers and len(answers) != len(prompts):
            raise PipelineError(
                f"--answer given {len(answers)} times for {len(prompts)} --prompt; match them"
            )
        golds = list(answers) or [""] * len(prompts)
        from ..data.processor import conversation

        return [{"prompt": conversation(config.prompt.system_prompt, p), "answer": gold}
                for p, gold in zip(prompts, golds, strict=True)], None  # fmt: skip
    from ..data import load_grpo_data

    data = load_grpo_data(config, tokenizer)
    rows = data.validation if data.validation is not None else data.train
    rows = rows.select(range(min(num, len(rows))))
    return [{**row, "answer": str(row["answer"])} for row in rows], data.max_completion_length


def diagnose(
    config: PipelineConfig,
    adapter: str | Path | None,
    *,
    num: int = 4,
    prompts: Sequence[str] = (),
    answers: Sequence[str] = (),
) -> dict[str, Any]:
    """Generate GRPO groups with the trained model and return the report (``prompts``, ``overall``, ``hints``)."""
    from ..evaluation.judge import CompletionJudge
    from ..reporting.progress import ProgressView
    from ..rewards import build_rewards
    from ..rollout import SamplingSettings, generation_budget, render_prompts

    loaded = common.load_model(config, adapter, generates=True)
    engine, tokenizer = loaded.engine.name, loaded.manager.tokenizer
    try:
        problems, computed = load_problems(config, tokenizer, num, prompts, answers)
        conversations = [row["prompt"] for row in problems]
        k = config.grpo_training.num_generations
        budget = generation_budget(config, computed)
        sampling = SamplingSettings.from_config(config, num_samples=k, max_new_tokens=budget, seed=config.seed)
        with ProgressView("sampling groups", len(conversations) * k, unit="completion") as view:
            groups = loaded.engine.generate(conversations, sampling, batch_size=config.evaluation.batch_size,
                                            progress=view.advance)  # fmt: skip
        prefilled = render_prompts(tokenizer, conversations[:1])[0].endswith(config.prompt.reasoning_start)
    finally:
        loaded.free()
    judge = CompletionJudge(config.prompt, *build_rewards(config.rewards, config.prompt))
    _show_samples(config.evaluation.sample_answers, judge, problems, groups)
    tags = _tags(config, prefilled)
    per_prompt = [
        {"prompt": row["prompt"][-1]["content"], "answer": row["answer"], **_figures(group, row, tags, judge)}
        for row, group in zip(problems, groups, strict=True)
    ]
    overall = overall_figures(per_prompt)
    ctx = HintContext(config.rollout_sampling.temperature, k, sampling.max_new_tokens, adapter is not None,
                      config.grpo_training.advantages, sampling_filters(config.rollout_sampling))
    settings = _settings(adapter, engine, sampling)
    return {"settings": settings, "prompts": per_prompt, "overall": overall, "hints": hints(overall, ctx)}


def _settings(adapter: str | Path | None, engine: str, sampling: Any) -> dict[str, Any]:
    """What the groups were sampled with, as the report records it."""
    return {
        "adapter": str(adapter) if adapter else None,
        "engine": engine,
        "num_generations": sampling.num_samples,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": sampling.min_p,
        "max_new_tokens": sampling.max_new_tokens,
    }


def _show_samples(count: int, judge: Any, problems: list[dict[str, Any]], groups: list[Any]) -> None:
    """The first completion of the first ``count`` groups, shown as every evaluation shows its answers."""
    from ..evaluation.scoring import sample_answers, score_problems
    from ..reporting.progress import log_samples

    firsts = [group[:1] for group in groups[:count]]
    log_samples(sample_answers(score_problems(judge, problems[:count], firsts), count))


def _tags(config: PipelineConfig, prefilled: bool) -> list[str]:
    """The tags a completion must write itself (the generation prompt may already hold the reasoning start)."""
    prompt = config.prompt
    tags = [prompt.reasoning_end, prompt.solution_start, prompt.solution_end]
    return tags if prefilled else [prompt.reasoning_start, *tags]


def _figures(group, row, tags, judge) -> dict[str, Any]:
    texts = [completion.text for completion in group]
    scores = judge.row_scores(row, texts)
    total = judge.total_rewards(scores)
    correct = [judge.is_correct(text, row) for text in texts] if row["answer"] else []
    figures = group_figures(texts, [c.finished for c in group], tags, scores, total, correct)
    return {**figures, "completions": texts}


def sampling_filters(sampling: Any) -> str:
    """The filters that truncate a sampling distribution, as the config names them ("" when none is on)."""
    on = [f"min_p {sampling.min_p}" if sampling.min_p > 0 else "", f"top_p {sampling.top_p}" if sampling.top_p < 1
          else "", f"top_k {sampling.top_k}" if sampling.top_k > 0 else ""]  # fmt: skip
    return ", ".join(item for item in on if item)


def render_table(report: dict[str, Any]) -> str:
    """The report as text: one line per prompt, the overall figures by reward, then the hints."""
    s, overall = report["settings"], report["overall"]
    lines = [
        (
            f"adapter {s['adapter']}, {s['engine']} engine; {s['num_generations']} completions per prompt at temperature "
            f"{s['temperature']} (top_p {s['top_p']}, top_k {s['top_k']}, min_p {s['min_p']}), "
            f"at most {s['max_new_tokens']} tokens"
        ),
        "",
        f"{'#':>3}  {'distinct':>8}  {'similar':>7}  {'reward':>7}  {'std':>6}  {'trunc':>5}  prompt",
    ]
    for index, row in enumerate(report["prompts"]):
        question = " ".join(row["prompt"].split())
        lines.append(
            f"{index:>3}  {row['distinct']:>8.2f}  {row['similarity']:>7.2f}  {row['total_reward']['mean']:>7.2f}"
            f"  {row['total_reward']['std']:>6.2f}  {row['truncated']:>5.2f}  {question[:60]}"
        )
    lines += [
        "",
        (
            f"overall: distinct {overall['distinct']:.2f}, similarity {overall['similarity']:.2f}, "
            f"zero-std groups {overall['zero_std_groups']:.2f}, truncated {overall['truncation_rate']:.2f}, "
            f"right {overall['correct']:.2f}, all-wrong groups {overall['all_wrong_groups']:.2f}, phantom "
            f"{overall['phantom_groups']:.2f}"
        ),
        "tags:    " + ", ".join(f"{tag} {share:.2f}" for tag, share in overall["tags"].items()),
        f"{'reward':<28} {'mean':>7} {'std':>7}",
    ]
    for name, values in [*overall["rewards"].items(), ("total (weighted)", overall["total_reward"])]:
        lines.append(f"{name:<28} {values['mean']:>7.2f} {values['std']:>7.2f}")
    lines += (
        ["", *(f"hint: {h['message']}" for h in report["hints"])] if report["hints"] else ["", "no hints"]
    )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="debug_grpo.py", description=__doc__.splitlines()[0])
    add_config_arguments(parser)
    common.add_engine_argument(parser)
    parser.add_argument("--adapter", help="trained weights to load (default: <output_dir>/sft/final)")
    parser.add_argument("--base", action="store_true", help="use the base model without any adapter")
    parser.add_argument(
        "--num", type=int, default=4, help="prompts from the GRPO validation split (default 4)"
    )
    parser.add_argument("--prompt", action="append", default=[], help="a question to sample (repeatable)")
    parser.add_argument("--answer", action="append", default=[], help="gold answer for each --prompt")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


@command(build_parser)
def main(args: argparse.Namespace) -> int:
    if args.num < 1:
        raise PipelineError(f"--num must be >= 1 (got {args.num})")
    config = common.config_from(args)
    adapter = None if args.base else (args.adapter or common.default_adapter(config, prefer_grpo=False))
    report = diagnose(config, adapter, num=args.num, prompts=args.prompt, answers=args.answer)
    print(json.dumps(report, indent=2) if args.json else render_table(report))
    return 0
