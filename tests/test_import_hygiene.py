"""The package's import structure: what may import what, and when unsloth may be imported.

Unsloth patches transformers/trl/peft when it is imported, so it must be imported first or not at all. A fake
``unsloth`` package that records its own import sits on the path of a fresh interpreter: importing the whole
package on a CPU machine must never import it, while a machine where CUDA is available (simulated) does import
it when the backend is chosen, which shows the check can see an import at all.

The structure is read from the source with ``ast`` (every import, those inside functions too): no two modules
and no two packages import each other, the model layer imports nothing from the layers that use it, and what
differs between backends is asked of the backend object, never decided by comparing its name.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MODULES = [
    "llm_finetuning",
    "llm_finetuning.tools.train",
    "llm_finetuning.pipeline",
    "llm_finetuning.model",
    "llm_finetuning.data",
    "llm_finetuning.evaluation.evaluator",
    "llm_finetuning.rollout",
    "llm_finetuning.rewards",
    "llm_finetuning.rollout.trl",
    "llm_finetuning.rollout.unsloth",
    "llm_finetuning.rollout.server",
    "llm_finetuning.tools.evaluate",
    "llm_finetuning.tools.infer",
    "llm_finetuning.tools.export",
    "llm_finetuning.tools.debug_grpo",
]


def run_with_fake_unsloth(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "fake" / "unsloth"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import os, pathlib\npathlib.Path(os.environ['UNSLOTH_IMPORT_RECORD']).write_text('imported')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")]),
        "UNSLOTH_IMPORT_RECORD": str(tmp_path / "record"),
        "CUDA_VISIBLE_DEVICES": "",  # a CPU machine, also where a GPU is present
    }
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_importing_every_module_on_cpu_never_imports_unsloth_or_vllm(tmp_path):
    result = run_with_fake_unsloth(tmp_path, f"""
        import importlib, sys
        for name in {MODULES!r}:
            importlib.import_module(name)
        from llm_finetuning.config import ModelConfig
        from llm_finetuning.model import choose_backend
        print(choose_backend(ModelConfig()).name)
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("unsloth", "vllm", "unsloth_zoo")))
        """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["hf", "[]"]
    assert not (tmp_path / "record").exists()


def test_the_fake_unsloth_is_seen_when_cuda_makes_the_backend_import_it(tmp_path):
    result = run_with_fake_unsloth(tmp_path, """
        import torch
        torch.cuda.is_available = lambda: True
        from llm_finetuning.config import ModelConfig
        from llm_finetuning.model import choose_backend
        print(choose_backend(ModelConfig(model_name="some/model")).name)
        """)
    assert (tmp_path / "record").read_text() == "imported", result.stderr[-2000:]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source (``from . import x`` counts as ``x``)."""
    files = {_module_name(path): path for path in (SRC / "llm_finetuning").rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets.update(f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in node.names)
        graph[name] = {target for target in targets if target in files and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of nodes that reach each other (strongly connected components of more than one node)."""
    reach = {node: set() for node in graph}
    for node, targets in graph.items():
        stack = list(targets)
        while stack:
            nxt = stack.pop()
            if nxt not in reach[node]:
                reach[node].add(nxt)
                stack.extend(graph.get(nxt, ()))
    groups = {frozenset({n} | {m for m in reach[n] if n in reach.get(m, ())}) for n in graph}
    return [set(group) for group in groups if len(group) > 1]


def _layer(module: str) -> str:
    """The package (config, model, ...) or top-level module a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_no_two_modules_and_no_two_packages_import_each_other():
    graph = import_graph()
    assert cycles(graph) == []
    layers: dict[str, set[str]] = {}
    for module, targets in graph.items():
        layers.setdefault(_layer(module), set()).update(_layer(t) for t in targets if _layer(t) != _layer(module))
    assert cycles(layers) == []


def test_the_model_layer_imports_nothing_from_the_layers_that_use_it():
    above = {"rollout", "evaluation", "training", "session", "pipeline", "tools"}
    arrows = {(module, target) for module, targets in import_graph().items() if _layer(module) == "model"
              for target in targets if _layer(target) in above}  # fmt: skip
    assert arrows == set()


def test_config_runtime_and_reporting_import_nothing_above_them():
    """``config/`` (the ground floor: what a run is told), ``runtime/`` (processes, environment, logging, files)
    and ``reporting/`` (what a run shows and writes) sit under every other layer: they may import the errors and
    the schema, reporting the runtime, nothing else (the names a config refers to are checked by their owners,
    ``session/checks.py``)."""
    allowed = {"config": {"errors", "schema"}, "runtime": {"errors"}, "reporting": {"errors", "runtime"}}
    arrows = {(module, target) for module, targets in import_graph().items() if _layer(module) in allowed
              for target in targets
              if _layer(target) != _layer(module) and _layer(target) not in allowed[_layer(module)]}  # fmt: skip
    assert arrows == set()


def test_the_package_root_holds_the_runs_story_and_the_ground_floor():
    """Everything else lives in a package named for its job (session, runtime, reporting, tasks, tools, ...)."""
    root = sorted(path.name for path in (SRC / "llm_finetuning").glob("*.py"))
    assert root == ["__init__.py", "__main__.py", "errors.py", "pipeline.py", "schema.py"]


def test_a_run_is_assembled_in_one_place():
    """Sleep mode asked for, backend chosen and its libraries imported first, plan resolved, model manager and
    engine owner made: only ``Session.open`` does it (the pipeline and every tool open a session)."""
    steps = {"ModelManager", "EngineOwner", "request_standby", "quiet_libraries", "RunPlan.resolve", "backend.prepare"}
    found = set()
    for path in (SRC / "llm_finetuning").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = getattr(func, "id", None) or f"{getattr(getattr(func, 'value', None), 'id', '')}.{getattr(func, 'attr', '')}"
                if name in steps:
                    found.add((str(path.relative_to(SRC / "llm_finetuning")), name))
    assert {where for where, _ in found} == {"session/session.py"}, found


# What a run decides, and the only places that decide it: a call anywhere else would decide it again (and could
# decide differently). Everything else reads the answer: the plan's precision, the session's backend and engine.
DECIDED_ONCE = {
    "Precision.resolve": {"session/plan.py"},  # the weights' dtype and the autocast (RunPlan.precision)
    "choose_backend": {"session/session.py", "tools/check.py"},  # check.py reports what a run would choose
    "choose_engine": {"rollout/engines.py"},  # what evaluation generates with: inside open_engine alone
    "open_engine": {"session/session.py"},  # ... which only Session.open_engine calls
}


def test_what_a_run_decides_is_decided_in_one_place():
    found: dict[str, set[str]] = {name: set() for name in DECIDED_ONCE}
    for path in (SRC / "llm_finetuning").rglob("*.py"):
        where = str(path.relative_to(SRC / "llm_finetuning"))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = getattr(func, "id", None) or f"{getattr(getattr(func, 'value', None), 'id', '')}.{getattr(func, 'attr', '')}"
                if called in found:
                    found[called].add(where)
    assert found == DECIDED_ONCE
    # and a positive control: the walk sees a call where there is one
    assert "session/plan.py" in found["Precision.resolve"]


def test_backend_differences_are_asked_of_the_backend_object_not_its_name():
    comparison = re.compile(r"""backend(_name|\.name)?\s*[!=]=\s*['"](unsloth|hf)['"]""")
    found = [f"{path.relative_to(SRC)}:{number}" for path in (SRC / "llm_finetuning").rglob("*.py")
             for number, line in enumerate(path.read_text().splitlines(), 1) if comparison.search(line)]  # fmt: skip
    assert found == []


def test_no_rollout_kind_is_compared_by_name():
    """What GRPO generates with is chosen once (the backend's ``choose_rollouts``, held by the ``RunPlan``); what a
    kind implies is an attribute of its ``RolloutKind`` (``rollout/kinds.py``): nothing compares the kind's name."""
    comparison = re.compile(r"""[!=]=\s*['"](generate|model_engine|trl_colocate|trl_server)['"]|rollouts in \(""")
    found = [f"{path.relative_to(SRC / 'llm_finetuning')}:{number}" for path in (SRC / "llm_finetuning").rglob("*.py")
             for number, line in enumerate(path.read_text().splitlines(), 1) if comparison.search(line)]  # fmt: skip
    assert found == []


def test_cuda_and_vllm_are_probed_only_by_the_hardware_modules():
    """``runtime/hardware.py`` probes the machine (``Machine``: CUDA, whether vLLM loads; the GPUs a launch sees)
    and ``model/hardware.py``'s rules act on it; everything else is handed the answer (the backend's ``machine``,
    the plan's ``cuda``, the launch's ``gpus``), so one run sees one machine."""
    probe = re.compile(r"torch\.cuda\.(is_available|device_count)\(|\bon_cuda\(|\bvllm_problem\(")
    allowed = {"model/hardware.py", "runtime/hardware.py"}
    found = [f"{where}:{number}" for path in (SRC / "llm_finetuning").rglob("*.py")
             if (where := str(path.relative_to(SRC / "llm_finetuning"))) not in allowed
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if probe.search(line.split("#")[0]) and not line.lstrip().startswith("def ")]  # fmt: skip
    assert found == []
