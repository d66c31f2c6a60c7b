"""Command line of ``run_training.py``: parse flags, build the config, run the pipeline, report errors.

Errors the user can fix (config, data, model choice) print one line on stderr and exit 2; an interrupted run
exits 130 after saving a checkpoint and printing the command that resumes it. Everything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import functools
import shlex
import sys
from collections.abc import Callable, Sequence

from ..config import PipelineConfig
from ..errors import PipelineError, TrainingInterrupted, os_error_code
from ..session.checks import check_config

DEFAULT_CONFIG = "configs/default_config.yaml"


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--set`` and ``--verbose``: shared by run_training.py and every tool, so they read
    configs and speak alike."""
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"YAML config (default: {DEFAULT_CONFIG})")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override any config field, e.g. --set grpo_training.num_generations=8 (repeatable)",
    )
    parser.add_argument(
        "--verbose", action="store_true",
        help="also show what transformers, datasets and huggingface_hub print themselves: their progress "
             "bars for loading, saving and mapping, the trainers' own bar and log lines, their messages",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_training.py",
        description="Two-phase fine-tuning for math reasoning: SFT teaches the format, GRPO improves answers.",
    )
    add_config_arguments(parser)
    parser.add_argument("--skip-sft", action="store_true", help="skip SFT (and the before-SFT evaluation); GRPO starts from <output_dir>/sft/final")
    parser.add_argument("--skip-grpo", action="store_true", help="stop after SFT")
    parser.add_argument("--resume", action="store_true", help="continue unfinished phases from their checkpoints")
    parser.add_argument("--output-dir", help="where checkpoints, logs and the adapter go (config: output_dir)")
    parser.add_argument("--max-steps", type=int, help="max_steps for the phases that run")
    parser.add_argument("--learning-rate", type=float, help="learning_rate for the phases that run")
    parser.add_argument("--preflight", action=argparse.BooleanOptionalAction, default=None,
                        help="first train one step of each phase on its worst case (longest examples, full-length "
                             "completions), so an out-of-memory error comes now, not hours in (default: on a CUDA GPU)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config as YAML and exit")
    parser.add_argument(
        "--help-config", action="store_true", help="list every config field with its value and help, and exit"
    )
    return parser


def resolve_config(args: argparse.Namespace) -> PipelineConfig:
    """The config file plus every command-line override, validated."""
    overrides = list(args.overrides)
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    phases = [name for name, skipped in (("sft_training", args.skip_sft), ("grpo_training", args.skip_grpo))
              if not skipped]
    for phase in phases:
        if args.max_steps is not None:
            overrides.append(f"{phase}.max_steps={args.max_steps}")
        if args.learning_rate is not None:
            overrides.append(f"{phase}.learning_rate={args.learning_rate}")
    return check_config(PipelineConfig.from_yaml(args.config, overrides))


# How each launcher's command starts; its own options (config file, process count) are the user's to repeat.
_LAUNCH_PREFIX = {
    "accelerate": "uv run accelerate launch <the same launch options> run_training.py",
    "torchrun": "uv run torchrun <the same launch options> run_training.py",
}


def resume_command(argv: Sequence[str], launcher: str = "none") -> str:
    """The command that continues this run: the same launch and arguments plus --resume."""
    args = list(argv)
    if "--resume" not in args:
        args.append("--resume")
    prefix = _LAUNCH_PREFIX.get(launcher, "uv run python run_training.py")
    return " ".join([prefix, *map(shlex.quote, args)])


# What the machine refuses, not what the code got wrong: the disk is full, or the folder is not ours to write.
_DISK_ERRORS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
                errno.EROFS: "the filesystem is read-only", errno.EACCES: "permission denied",
                errno.EPERM: "permission denied"}  # fmt: skip


def run_reporting_errors(body: Callable[[], int], folder: str | None = None) -> int:
    """Run a command; a user-fixable ``PipelineError``, or a write the disk refused, prints one line on stderr and
    gives exit status 2; Ctrl-C gives 130 without a traceback. A refused write names its file, or when the
    library that wrote it does not say which (safetensors, torch.save), the command's output ``folder``."""
    try:
        return body()
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        code = os_error_code(exc)
        if code not in _DISK_ERRORS:
            raise
        where = getattr(exc, "filename", None) or (f"a file in {folder}" if folder else "a file")
        print(f"error: cannot write {where}: {_DISK_ERRORS[code]}; free space or fix the permissions (or "
              "choose another --output-dir), then run again (--resume continues a run): every save made so far "
              "is intact", file=sys.stderr)  # fmt: skip
        return 2
    except KeyboardInterrupt:
        print("interrupted: every save made so far is intact", file=sys.stderr)
        return 130


Body = Callable[[argparse.Namespace], int]


def command(build: Callable[[], argparse.ArgumentParser]) -> Callable[[Body], Callable[..., int]]:
    """Turn ``body(args) -> exit status`` into ``main(argv=None)``: parse ``argv`` with ``build()``, run the
    body, and report a user-fixable ``PipelineError`` as one line with exit status 2. The raw arguments are
    on ``args.argv`` (for messages that repeat the command)."""

    def decorate(body: Body) -> Callable[..., int]:
        @functools.wraps(body)
        def main(argv: Sequence[str] | None = None) -> int:
            argv = list(sys.argv[1:] if argv is None else argv)
            args = build().parse_args(argv)
            args.argv = argv
            return run_reporting_errors(lambda: body(args), getattr(args, "output_dir", None))

        return main

    return decorate


@command(build_parser)
def main(args: argparse.Namespace) -> int:
    config = resolve_config(args)
    if args.skip_sft and args.skip_grpo and config.expert_iteration.rounds == 0:
        raise PipelineError("--skip-sft and --skip-grpo together leave nothing to run; drop one of them (or set "
                            "expert_iteration.rounds to run expert iteration alone)")  # fmt: skip
    if args.print_config:
        print(config.to_yaml(), end="")
        return 0
    if args.help_config:
        from ..config.explain import explain

        print(explain(config))
        return 0
    from ..pipeline import RunOptions, run
    from ..runtime.distributed import is_main_process, leave_process_group, read_launch

    status = 0
    try:
        run(config, RunOptions(skip_sft=args.skip_sft, skip_grpo=args.skip_grpo, resume=args.resume,
                               preflight=args.preflight, verbose=args.verbose))
    except (TrainingInterrupted, KeyboardInterrupt) as exc:  # in a phase every rank stopped after the same step
        stopped = str(exc) or "interrupted outside a training phase; every save made so far is intact"
        if is_main_process():
            print(f"{stopped}\nResume with: {resume_command(args.argv, read_launch().launcher)}", file=sys.stderr)
        status = 130
    leave_process_group()  # not after an error: the other ranks may still be inside a collective
    return status
