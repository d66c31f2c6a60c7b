"""What README.md and docs/ name that the code must have (``tests/test_docs.py``).

Read from a Markdown text, each check returns the names it could not find (``[]`` when the text is right):

* ``missing_paths``: every ``…py`` path in backticks is a file of the repository (``src/llm_finetuning/…``,
  a path under the package such as ``training/grpo.py``, or a bare module name such as ``normalize.py``);
  a test id ``tests/test_x.py::test_y`` names a test function in that file.
* ``missing_python``: every dotted name in backticks that starts with ``llm_finetuning`` or with one of the
  package's modules (``grading.extract``, ``cli.main``, ``plan.uses_vllm``) resolves: the module imports and
  the rest is an attribute of it, or of a class defined in it (a dataclass field counts). Dotted names that
  start elsewhere (``datasets.Dataset``, ``vllm.LLM``, a file name such as ``summary.json``) are not ours to
  check, and a call (``model.generate()``) is code about an object, not a name.
* ``missing_config_keys``: every dotted name that starts with a config section (``grpo_training.oversample``,
  ``data.reasoning_gym.working``) is a field of the typed config, down to a mapping field (``trl``,
  ``settings``) whose keys are free.
* ``unparsable_commands``: every command of a code block or span that runs one of our programs parses with
  that program's own argument parser (nothing runs).
* ``unknown_names``: every snake_case name alone in backticks (``vllm_pays_off``, ``check_trainer``)
  is a word of the project's code or configs, or a field of TRL's configs; names of other libraries the docs
  mention, and former names they recall, are listed in ``ELSEWHERE``.
* ``missing_flags``: every ``--flag`` of a command that runs our code (``run_training.py``, ``llm-finetune``,
  ``python -m llm_finetuning…``, ``benchmarks/….py``) is defined by one of our argument parsers, and every
  ``llm-finetune`` subcommand exists.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import io
import re
import shlex
import sys
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "llm_finetuning"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

THIRD_PARTY_FILES = {"convert_hf_to_gguf.py"}  # llama.cpp's converter, which the export tool runs
# Names the docs mention that are not ours: vLLM's CPU kernels, and the evaluate tool's former metric name.
ELSEWHERE = frozenset({"rms_norm", "fused_add_rms_norm", "silu_and_mul", "avg_length_tokens"})
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_PY_PATH = re.compile(r"[\w./-]+\.py(?:::\w+)?")
_DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_FILE_SUFFIXES = ("py", "json", "jsonl", "yaml", "yml", "html", "log", "lock", "jinja", "md", "txt", "toml", "gguf",
                  "whl", "csv", "parquet", "safetensors", "bin", "pt", "sh", "cfg", "so")  # fmt: skip
_COMMAND = re.compile(
    r"(?:run_training\.py|llm-finetune|-m\s+llm_finetuning[\w.]*|benchmarks/\w+\.py)(?P<args>[^`\n]*)"
)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_DEFINED_FLAG = re.compile(r"""add_argument\(\s*(?:"-\w",\s*)?"(--[a-z][a-z0-9-]*)\"""")


def code_spans(text: str) -> list[str]:
    """The inline code spans of a Markdown text (fenced blocks hold commands: ``missing_flags`` and
    ``unparsable_commands`` read those)."""
    return [span.strip() for span in _CODE_SPAN.findall(_FENCE.sub("", text))]


def missing_paths(text: str) -> list[str]:
    files = _repository_files()
    missing = []
    for span in code_spans(text):
        if not _PY_PATH.fullmatch(span):
            continue
        path, _, test = span.partition("::")
        if path.split("/")[0] in _third_party() or path in THIRD_PARTY_FILES:
            continue
        found = [f for f in files if f == path or f.endswith("/" + path)]
        if not found or (test and not any(re.search(rf"def {test}\b", (ROOT / f).read_text()) for f in found)):
            missing.append(span)
    return missing


def missing_python(text: str) -> list[str]:
    modules = _our_modules()
    sections = _config_sections()
    missing = []
    for span in code_spans(text):
        if not _DOTTED.fullmatch(span) or span.rsplit(".", 1)[1] in _FILE_SUFFIXES:
            continue
        head, *rest = span.split(".")
        if head == "llm_finetuning":
            head, *rest = rest or [""]
        if head in sections and _config_field(span) is not None:
            continue
        if hasattr(builtins, head) and _resolves("builtins", [head, *rest]):  # str.find
            continue
        theirs = head in _third_party() or head in sys.stdlib_module_names  # trl.SFTTrainer, os.fork
        if theirs and (_resolves(head, rest) or importlib.util.find_spec(head) is None):
            continue  # checked where the library is installed
        if not any(_resolves(module, rest) for module in modules.get(head, [])):
            missing.append(span)  # a module renamed or gone is caught here: its name resolves nowhere
    return missing


def missing_config_keys(text: str) -> list[str]:
    sections = _config_sections()
    return [
        span for span in code_spans(text)
        if _DOTTED.fullmatch(span) and span.split(".")[0] in sections and span.split(".")[0] not in _our_modules()
        and _config_field(span) is None
    ]  # fmt: skip


def unknown_names(text: str) -> list[str]:
    known = _code_words() | ELSEWHERE
    return [span for span in code_spans(text)
            if _SNAKE.fullmatch(span.removesuffix("()")) and span.removesuffix("()") not in known]  # fmt: skip


def missing_flags(text: str) -> list[str]:
    defined, commands = _defined_flags(), _subcommands()
    missing = []
    for command in _COMMAND.finditer(text):
        words = command.group("args").split()
        if command.group().startswith("llm-finetune") and words and words[0].isalpha() and words[0] not in commands:
            missing.append(f"llm-finetune {words[0]}")
        missing += [flag for flag in _FLAG.findall(command.group("args")) if flag not in defined]
    return missing


def unparsable_commands(text: str) -> list[str]:
    """The commands in code blocks and code spans that run our programs but that their own argument parser
    refuses (``run_training.py``, ``debug_grpo.py``, ``check.py``, ``llm-finetune <command>``, ``python -m
    llm_finetuning…``): parsed as the program would, never run."""
    blocks = [block.replace("\\\n", " ") for block in _FENCE.findall(text)]
    lines = [line.split("  #")[0] for block in blocks for line in block.splitlines()] + code_spans(text)
    refused = []
    for line in lines:
        if "..." in line or "…" in line:  # a sketch of a command, not one to run
            continue
        if "[--" in line:  # usage: "[--gpu-memory 24GiB]" is an option that may be given
            line = line.replace("[--", "--").replace("]", "")
        parsed = _program(line)
        if parsed is None:
            continue
        parser, args = parsed
        try:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(args)  # --help prints and exits 0: parsed
        except SystemExit as stop:
            if stop.code:
                refused.append(line.strip())
    return refused


def _program(line: str) -> tuple[object, list[str]] | None:
    """The parser of the program ``line`` runs, and its arguments; ``None`` when it runs none of ours."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    from llm_finetuning.tools.app import COMMANDS

    scripts = {"run_training.py": "llm_finetuning.tools.train", "debug_grpo.py": "llm_finetuning.tools.debug_grpo",
               "check.py": "llm_finetuning.tools.check"}  # fmt: skip
    launched = False  # a script runs only after python or a launcher (a diagram's "run_training.py ─►" does not)
    for at, word in enumerate(words):
        rest = words[at + 1 :]
        launched = launched or word in ("python", "python3", "launch", "torchrun") or word.endswith("/python")
        if launched and (word in scripts or word.endswith(tuple(f"/{name}" for name in scripts))):
            module = scripts[word.rsplit("/", 1)[-1]]
        elif word in ("llm-finetune", "llm_finetuning") and (word == "llm-finetune" or words[at - 1] == "-m"):
            if not rest or rest[0] not in COMMANDS:
                return None  # the usage, or a subcommand missing_flags names
            module, rest = COMMANDS[rest[0]][0], rest[1:]
        elif word.startswith("llm_finetuning.tools.") and at and words[at - 1] == "-m":
            module = word
        else:
            continue
        return importlib.import_module(module).build_parser(), rest
    return None


def _resolves(module_name: str, attributes: list[str]) -> bool:
    try:
        target = importlib.import_module(module_name)
    except ModuleNotFoundError as error:  # a library an extra installs is not here: not ours to judge
        return not (error.name or "").startswith(module_name.split(".")[0])
    except ImportError:
        return False
    for at, name in enumerate(attributes):
        if hasattr(target, "__path__"):  # a package: its submodule first
            try:
                target = importlib.import_module(f"{target.__name__}.{name}")
                continue
            except ImportError:
                pass
        if hasattr(target, name):
            target = getattr(target, name)
            continue
        return at == len(attributes) - 1 and _defines_member(target, name)
    return True


def _defines_member(module: object, name: str) -> bool:
    """Whether a class defined in ``module`` has ``name`` (an attribute, a dataclass field, an annotation, an
    attribute its methods set: ``self.machine = …``)."""
    source = getattr(module, "__file__", None)
    if source and re.search(rf"\bself\.{re.escape(name)}\s*(?::[^=\n]+)?=(?!=)", Path(source).read_text()):
        return True
    for value in vars(module).values() if hasattr(module, "__dict__") else ():
        if isinstance(value, type) and getattr(value, "__module__", "") == getattr(module, "__name__", None):
            fields = {f.name for f in dataclasses.fields(value)} if dataclasses.is_dataclass(value) else set()
            if hasattr(value, name) or name in fields or name in getattr(value, "__annotations__", {}):
                return True
    return False


def _config_field(span: str) -> object | None:
    """The config field a dotted key names (its type), or ``None``; a mapping field takes any key after it."""
    from llm_finetuning.config import PipelineConfig

    kind: object = PipelineConfig
    for name in span.split("."):
        origin = typing.get_origin(kind)
        if kind is typing.Any or origin in (dict, typing.Union) or kind is dict:
            return kind
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            return None
        hints = typing.get_type_hints(kind)
        if name not in hints and hasattr(kind, "TRL_CLASS"):  # a section that holds TRL's fields by name
            from llm_finetuning.config.trl_fields import trl_defaults

            return typing.Any if name in trl_defaults(kind.TRL_CLASS) else None
        if name not in hints:
            return None
        kind = _unwrap_optional(hints[name])
    return kind


def _unwrap_optional(kind: object) -> object:
    arguments = [a for a in typing.get_args(kind) if a is not type(None)]
    optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and len(arguments) == 1
    return arguments[0] if optional else kind


@functools.cache
def _third_party() -> frozenset[str]:
    """The import names of the locked distributions (``uv.lock``): a name of theirs is not ours to check."""
    names = re.findall(r'^name = "([^"]+)"', (ROOT / "uv.lock").read_text(), re.MULTILINE)
    return frozenset(name.replace("-", "_") for name in names) - {"llm_finetuning"}


@functools.cache
def _config_sections() -> frozenset[str]:
    from llm_finetuning.config import PipelineConfig

    return frozenset(f.name for f in dataclasses.fields(PipelineConfig))


@functools.cache
def _our_modules() -> dict[str, list[str]]:
    """Every module and subpackage of ``llm_finetuning``, by its last name (``judge`` → two modules)."""
    names: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if len(parts) > 1:
            names.setdefault(parts[-1], []).append(".".join(parts))
    return names


@functools.cache
def _repository_files() -> tuple[str, ...]:
    skip = {".venv", ".venv-vllm", ".git", "outputs", "node_modules"}
    return tuple(
        str(path.relative_to(ROOT)) for path in ROOT.rglob("*.py") if not skip & set(path.relative_to(ROOT).parts)
    )


@functools.cache
def _code_words() -> frozenset[str]:
    """Every word of the project's code (not its tests: they name what may be missing), configs and CI script,
    and every field of TRL's configs."""
    from llm_finetuning.config.trl_fields import trl_defaults

    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"),
               *(ROOT / "configs").glob("*.yaml"), *ROOT.glob("*.py"), ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
    words = {word for path in sources for word in re.findall(r"\w+", path.read_text(errors="replace"))}
    return frozenset(words | set(trl_defaults("GRPOConfig")) | set(trl_defaults("SFTConfig")))


@functools.cache
def _defined_flags() -> frozenset[str]:
    sources = [ROOT / "run_training.py", *PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    flags = {flag for path in sources for flag in _DEFINED_FLAG.findall(path.read_text())}
    return frozenset(flags | {"--help"})  # argparse's own


@functools.cache
def _subcommands() -> frozenset[str]:
    from llm_finetuning.tools.app import COMMANDS

    return frozenset(COMMANDS)
