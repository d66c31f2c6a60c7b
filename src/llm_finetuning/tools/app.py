"""``llm-finetune``: one command for the pipeline and every tool, from any directory once the package is installed.

    llm-finetune train --config tiny                   # the offline demo (a shipped config, by name)
    llm-finetune train --config my.yaml --set grpo_training.max_steps=100
    llm-finetune eval --config outputs/tiny/config.yaml --adapter outputs/tiny/grpo_saved_lora
    llm-finetune infer --config outputs/tiny/config.yaml "What is 3 + 4?"
    llm-finetune export --config outputs/tiny/config.yaml --adapter outputs/tiny/grpo_saved_lora --merged merged/
    llm-finetune debug --config outputs/tiny/config.yaml
    llm-finetune check

``python -m llm_finetuning`` is the same command. Each subcommand is the matching script or module of the
repository (``run_training.py``, ``python -m llm_finetuning.tools.evaluate``, ...) with the same flags; ``--help``
after a subcommand lists them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from ..schema import closest

__all__ = ["COMMANDS", "entry"]

# subcommand -> (module, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("llm_finetuning.tools.train", "run the pipeline: SFT, then GRPO, with evaluations before and after"),
    "eval": ("llm_finetuning.tools.evaluate", "score a model on the run's held-out problems or a benchmark"),
    "infer": ("llm_finetuning.tools.infer", "answer a question with a trained model"),
    "export": ("llm_finetuning.tools.export", "merge the adapter into the base weights, GGUF, push to the Hub"),
    "debug": ("llm_finetuning.tools.debug_grpo", "why GRPO is (not) learning: sample groups as GRPO does"),
    "check": ("llm_finetuning.tools.check", "what this machine can run"),
}


def usage() -> str:
    rows = "\n".join(f"  {name:<8} {what}" for name, (_, what) in COMMANDS.items())
    return ("usage: llm-finetune <command> [flags]   (llm-finetune <command> --help lists its flags)\n\n"
            f"commands:\n{rows}\n\nShipped configs can be named: --config tiny, --config smollm2.")  # fmt: skip


def entry(argv: Sequence[str] | None = None) -> int:
    """Run ``llm-finetune <command> ...``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        match = closest(name, COMMANDS)
        print(f"error: unknown command {name!r}; " + (f"did you mean {match}?" if match else
              f"commands: {', '.join(COMMANDS)}"), file=sys.stderr)  # fmt: skip
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    sys.argv = [f"llm-finetune {name}", *rest]
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(entry())
