"""Use a trained model: answer a question from the command line, interactively, or from a program.

    uv run python -m llm_finetuning.tools.infer --config configs/tiny.yaml "What is 15 + 23?"
    uv run python -m llm_finetuning.tools.infer --config configs/tiny.yaml --adapter outputs/tiny/grpo_saved_lora
    (no question: an interactive prompt; an empty line or Ctrl-D ends it)

From Python:

    >>> from llm_finetuning.tools.infer import load_trained                        # doctest: +SKIP
    >>> model = load_trained("configs/tiny.yaml")  # the GRPO adapter, else sft/final  # doctest: +SKIP
    >>> reasoning, answer = model.solve("What is 15 + 23?")                        # doctest: +SKIP

Generation is greedy through the one generation function, with the question phrased as in training (the
config's system prompt, then the user turn); the reasoning is the text before the reasoning end tag and the
answer is what the training grader extracts (``None`` when the completion has no answer).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import PipelineConfig
from ..evaluation.judge import CompletionJudge
from ..session import Session
from . import common
from .train import add_config_arguments, command

__all__ = ["TrainedModel", "load_trained", "main"]


@dataclass
class TrainedModel:
    """A loaded model plus what it needs to answer: the config's tags and the generation budget."""

    config: PipelineConfig
    loaded: Session  # the model, the engine it generates with, and the owner of any vLLM engine
    adapter: Path | None
    max_new_tokens: int
    judge: CompletionJudge  # where the reasoning ends and what the answer is, as evaluation reads them

    def solve(self, problem: str) -> tuple[str, str | None]:
        """``(reasoning, answer)`` for one question."""
        ((reasoning, answer, _),) = self.solve_many([problem])
        return reasoning, answer

    def solve_many(self, problems: Sequence[str]) -> list[tuple[str, str | None, str]]:
        """``(reasoning, answer, completion)`` per question, generated in batches."""
        from ..data.processor import conversation
        from ..rollout import SamplingSettings

        system_prompt = self.config.prompt.system_prompt
        conversations = [conversation(system_prompt, problem) for problem in problems]
        completions = self.loaded.engine.generate(
            conversations, SamplingSettings(greedy=True, max_new_tokens=self.max_new_tokens),
            batch_size=self.config.evaluation.batch_size,
        )  # fmt: skip
        return [(self.judge.reasoning(c.text), self.judge.answer(c.text), c.text) for (c,) in completions]

    def free(self) -> None:
        self.loaded.free()


def load_trained(
    config: PipelineConfig | str | Path,
    adapter: str | Path | None = None,
    *,
    overrides: Sequence[str] = (),
    max_new_tokens: int | None = None,
    engine: str | None = None,
) -> TrainedModel:
    """Load base + ``adapter`` (default: the run's GRPO adapter, else ``sft/final``) for answering questions.

    ``engine`` (auto | hf | vllm; default the config's ``evaluation.engine``) is what generates the answers.
    """
    overrides = [*overrides, *([f"evaluation.engine={engine}"] if engine else [])]
    if not isinstance(config, PipelineConfig):
        config = PipelineConfig.from_yaml(config, list(overrides))
    elif overrides:
        config = config.with_overrides(list(overrides))
    from ..rollout import generation_budget

    path = Path(adapter) if adapter is not None else common.default_adapter(config)
    loaded = common.load_model(config, path, generates=True)
    budget = max_new_tokens or generation_budget(config)
    return TrainedModel(config, loaded, path, budget, CompletionJudge(config.prompt))


def print_answer(model: TrainedModel, question: str) -> None:
    ((reasoning, answer, completion),) = model.solve_many([question])
    print(f"reasoning: {reasoning or '(none)'}")
    print(f"answer: {answer if answer is not None else '(no answer in the completion)'}")
    if answer is None:
        print(f"completion: {completion}")


def interact(model: TrainedModel) -> None:
    """Read questions until an empty line or end of input."""
    while True:
        try:
            question = input("question> ").strip()
        except EOFError:
            print()
            return
        if not question:
            return
        print_answer(model, question)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m llm_finetuning.tools.infer", description=__doc__.splitlines()[0]
    )
    add_config_arguments(parser)
    common.add_engine_argument(parser)
    parser.add_argument(
        "--adapter", help="trained weights (default: <output_dir>/<save_path>, else sft/final)"
    )
    parser.add_argument("--max-new-tokens", type=int, help="generation budget (default: as in evaluation)")
    parser.add_argument("question", nargs="*", help="the question (none: interactive prompt)")
    return parser


@command(build_parser)
def main(args: argparse.Namespace) -> int:
    config = common.config_from(args)
    model = load_trained(config, args.adapter, max_new_tokens=args.max_new_tokens)
    try:
        if args.question:
            print_answer(model, " ".join(args.question))
        else:
            interact(model)
    finally:
        model.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
