"""reasoning-gym's config and the missing extra, checked without the package: these run in the README's environment.

The shapes of ``data.reasoning_gym`` and of a ``reasoning_gym`` dataset are refused before anything imports
the package; without the package (absent here, or made absent for the test by a ``None`` in ``sys.modules``,
which is how Python marks a module that cannot be imported) a config naming a task or the reward is refused in
one line naming ``uv sync --extra reasoning-gym``; and importing the project never imports the package.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import TINY_YAML

from llm_finetuning.config import ConfigError, PipelineConfig
from llm_finetuning.rewards import RewardParamError, get_reward
from llm_finetuning.session.checks import check_config

FIX = "install it with uv sync --extra reasoning-gym"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"grpo": {"name": "problems.jsonl", "format": "reasoning_gym"}},
            'data.grpo.format: reasoning_gym reads generated problems: set name to "reasoning_gym:<task>"',
        ),
        (
            {"sft": {"name": "reasoning_gym:chain_sum", "format": "gsm8k"}},
            "data.sft.format: reasoning_gym:chain_sum generates reasoning-gym problems: use format reasoning_gym",
        ),
        ({"reasoning_gym": {"num_train": 0}}, "data.reasoning_gym.num_train: must be > 0 (got 0)"),
        ({"reasoning_gym": {"num_eval": -1}}, "data.reasoning_gym.num_eval: must be >= 0 (got -1)"),
        ({"reasoning_gym": {"heldout_templates": 1}}, "data.reasoning_gym.heldout_templates: must be in [0, 1)"),
        (
            {"reasoning_gym": {"settings": {"chain_sum": 3}}},
            "data.reasoning_gym.settings.chain_sum: expected a mapping of the task's settings, got 3",
        ),
        ({"reasoning_gym": {"settings": [1]}}, "data.reasoning_gym.settings: expected a mapping"),
        ({"reasoning_gym": {"num_trian": 5}}, "data.reasoning_gym.num_trian: unknown key; did you mean num_train?"),
    ],
)
def test_bad_shapes_are_one_line_config_errors(data, message):
    with pytest.raises(ConfigError) as caught:
        PipelineConfig.from_dict({"data": data})
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.fixture
def without_reasoning_gym(monkeypatch):
    """The package made unimportable, as in an environment without the extra."""
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)


@pytest.mark.parametrize("phase", ["sft", "grpo"])
def test_a_task_without_the_extra_names_the_install_command(without_reasoning_gym, phase):
    with pytest.raises(ConfigError) as caught:
        check_config(PipelineConfig.from_dict({"data": {phase: {"name": "reasoning_gym:gsm_symbolic"}}}))
    assert str(caught.value) == f"data.{phase}.name: reasoning_gym:gsm_symbolic needs the reasoning-gym package; {FIX}"


def test_the_reward_without_the_extra_is_refused_when_built(without_reasoning_gym):
    with pytest.raises(RewardParamError) as caught:
        get_reward("reasoning_gym")
    assert str(caught.value) == f"reasoning_gym: needs the reasoning-gym package; {FIX}"
    with pytest.raises(ConfigError) as caught:
        check_config(PipelineConfig.from_dict({"rewards": {"rewards": [{"name": "reasoning_gym"}]}}))
    assert str(caught.value) == f"rewards: reasoning_gym: needs the reasoning-gym package; {FIX}"


def test_configs_without_a_task_never_need_the_package(without_reasoning_gym):
    config = PipelineConfig.from_dict({"data": {"reasoning_gym": {"settings": {"chain_sum": {"min_terms": 2}}}}})
    assert config.data.reasoning_gym.settings == {"chain_sum": {"min_terms": 2}}


def test_importing_the_project_and_loading_a_config_does_not_import_reasoning_gym():
    code = (
        "import sys\n"
        "import llm_finetuning.config, llm_finetuning.data, llm_finetuning.rewards, llm_finetuning.pipeline\n"
        f"llm_finetuning.config.PipelineConfig.from_yaml({str(TINY_YAML)!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'reasoning_gym'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[]"]
