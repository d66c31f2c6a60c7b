"""Every ``>>>`` example in the package's docstrings runs and holds (the grader's, the rewards', the data
layer's and any other module's), except examples that need a trained model. A module whose examples need an
optional extra names its packages in ``__doctest_requires__``; without them its examples are skipped, saying so."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import llm_finetuning

MUST_HAVE_EXAMPLES = [
    "llm_finetuning.grading",
    "llm_finetuning.grading.extract",
    "llm_finetuning.grading.judge",
    "llm_finetuning.grading.labels",
    "llm_finetuning.grading.matrices",
    "llm_finetuning.grading.normalize",
    "llm_finetuning.grading.numeric",
    "llm_finetuning.grading.relations",
    "llm_finetuning.rewards.registry",
    "llm_finetuning.rewards.answer_rewards",
    "llm_finetuning.data.formats",
    "llm_finetuning.rollout.settings",
    "llm_finetuning.config.explain",
    "llm_finetuning.tools.group_stats",
]


def modules_with_examples() -> list[str]:
    """Modules whose docstrings hold examples (only modules whose source has ``>>>`` are imported)."""
    names = []
    for info in pkgutil.walk_packages(llm_finetuning.__path__, "llm_finetuning."):
        spec = importlib.util.find_spec(info.name)
        source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
        if ">>>" not in source:
            continue
        tests = doctest.DocTestFinder().find(importlib.import_module(info.name))
        if any(test.examples for test in tests):
            names.append(info.name)
    return sorted(names)


MODULES = modules_with_examples()


def test_the_grader_rewards_data_and_other_example_modules_are_collected():
    assert set(MUST_HAVE_EXAMPLES) <= set(MODULES)
    assert any(name.startswith("llm_finetuning.rewards.") for name in MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(name)
    missing = [package for package in getattr(module, "__doctest_requires__", ())
               if importlib.util.find_spec(package) is None]  # fmt: skip
    if missing:
        pytest.skip(f"{name}'s examples need {', '.join(missing)} (an optional extra)")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
