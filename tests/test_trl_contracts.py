"""The TRL internals the project replaces (``runtime/trl_patches.py``), read from the installed TRL: each still
exists with the parameters its replacement was written for, and the installed TRL is the version they were
written against. A TRL upgrade that moves one of them fails here, by name."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
import trl

from llm_finetuning.runtime.trl_patches import MODULE_ATTRIBUTES, OBJECT_METHODS, WRITTEN_FOR, replace_method

SRC = Path(__file__).resolve().parents[1] / "src" / "llm_finetuning"


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_the_installed_trl_is_the_one_the_replacements_were_written_for():
    assert trl.__version__.rpartition(".")[0] in WRITTEN_FOR, (trl.__version__, WRITTEN_FOR)


def test_pyproject_allows_exactly_the_trl_versions_the_overrides_are_tested_against():
    text = (SRC.parents[1] / "pyproject.toml").read_text()
    newest = WRITTEN_FOR[-1].split(".")
    assert f'"trl>={WRITTEN_FOR[0]},<{newest[0]}.{int(newest[1]) + 1}"' in text


@pytest.mark.parametrize(("owner", "method"), [(owner, method) for owner, methods in OBJECT_METHODS.items()
                                               for method in methods])  # fmt: skip
def test_every_replaced_method_exists_with_the_parameters_it_was_written_for(owner, method):
    parameters = list(inspect.signature(getattr(_resolve(owner), method)).parameters)
    assert parameters[0] == "self"
    assert tuple(parameters[1:]) == OBJECT_METHODS[owner][method]


@pytest.mark.parametrize(("module", "attribute"), MODULE_ATTRIBUTES.items())
def test_every_swapped_module_attribute_is_one_trl_uses(module, attribute):
    source = inspect.getsource(importlib.import_module(module))
    assert f"{attribute}(" in source or f"{attribute}.apply(" in source  # TRL calls it by that module-level name


@pytest.mark.parametrize("owner", ["trl.GRPOTrainer", "trl.SFTTrainer"])
def test_our_trainers_override_exactly_the_listed_internals_with_their_parameters(owner):
    from llm_finetuning.training.grpo_trainer import GRPOStep
    from llm_finetuning.training.sft import SharedPrefixLoss

    ours, base = {"trl.GRPOTrainer": GRPOStep, "trl.SFTTrainer": SharedPrefixLoss}[owner], _resolve(owner)
    overridden = {name for name in vars(ours) if not name.startswith("__") and hasattr(base, name)}
    assert overridden == set(OBJECT_METHODS[owner])  # a new override is listed first; no name of TRL's taken by chance
    for name in overridden:
        parameters = list(inspect.signature(getattr(ours, name)).parameters)[1:]
        assert parameters in (["args", "kwargs"], list(OBJECT_METHODS[owner][name])), name


def test_trls_reference_pass_is_the_one_beta_turns_on_and_its_loss_reads_what_we_give_it():
    # training/reference.py reads beta as 0 around the generation pass and hands the loss the kept rows' log-probs
    generation = inspect.getsource(trl.GRPOTrainer._generate_and_score_completions)
    assert generation.count("if self.beta != 0.0:") == 1 and "ref_per_token_logps" in generation
    assert 'inputs["ref_per_token_logps"]' in inspect.getsource(trl.GRPOTrainer._compute_loss)


def test_trls_loss_takes_advantages_per_token_as_line_credit_gives_them():
    # training/line_credit.py hands the loss (completions, tokens) advantages; TRL unsqueezes only one a completion
    loss = inspect.getsource(trl.GRPOTrainer._compute_loss)
    assert "if advantages.dim() == 1:" in loss and "advantages = advantages.unsqueeze(1)" in loss


def test_docs_architecture_lists_every_trl_internal_the_project_touches():
    listed = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    names = [f"{owner.rpartition('.')[2]}.{method}" for owner, methods in OBJECT_METHODS.items() for method in methods]
    assert [name for name in [*names, *MODULE_ATTRIBUTES.values()] if f"`{name}`" not in listed] == []


def test_a_replacement_that_is_not_listed_is_refused():
    class Trainer:
        def step(self):
            return "trl's"

    trainer = Trainer()
    with pytest.raises(KeyError, match="list it"):
        replace_method(trainer, "step", lambda self: "ours")
    assert trainer.step() == "trl's"


def test_replace_method_binds_to_the_one_object_and_returns_what_it_replaced():
    class Generation:
        def sync_weights(self):
            return "trl's"

    one, other = Generation(), Generation()
    replaced = replace_method(one, "sync_weights", lambda self: ("ours", self is one))
    assert one.sync_weights() == ("ours", True) and other.sync_weights() == "trl's" and replaced() == "trl's"


def test_nothing_else_binds_a_replacement_onto_an_object():
    """``types.MethodType`` (binding a function as an object's method) appears in trl_patches.py alone."""
    found = [f"{path.relative_to(SRC)}:{node.lineno}" for path in SRC.rglob("*.py")
             if path.name != "trl_patches.py"
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr == "MethodType"]  # fmt: skip
    assert found == []
