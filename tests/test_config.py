"""Config loading: defaults, YAML, overrides, and one clear error per kind of mistake."""

import dataclasses
from pathlib import Path

import pytest

from llm_finetuning.config import ConfigError, PipelineConfig
from llm_finetuning.session.checks import check_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", ["default_config.yaml", "tiny.yaml"])
def test_shipped_configs_load(name):
    config = PipelineConfig.from_yaml(CONFIGS / name)
    assert config.grpo_training.num_generations >= 2


def test_defaults_follow_the_seed():
    config = PipelineConfig()
    assert config.model.model_name == "unsloth/Qwen3-4B-Base"
    assert [r.name for r in config.rewards.rewards] == [
        "match_format_exactly", "match_format_approximately", "check_answer", "check_numbers"]
    assert config.evaluation.grpo_every_steps == 20
    assert config.grpo_training.train_validation_split == 0.9
    assert config.grpo_training.save_path == "grpo_saved_lora"


def test_partial_sections_keep_the_other_defaults():
    config = PipelineConfig.from_dict({"data": {"sft": {"max_samples": 10}}})
    assert config.data.sft.name == "unsloth/OpenMathReasoning-mini"
    assert config.data.sft.max_samples == 10


def test_overrides_parse_yaml_scalars():
    config = PipelineConfig().with_overrides(
        ["grpo_training.max_steps=7", "sft_training.learning_rate=1e-5", "model.lora=null",
         "prompt.solution_start=<ANS>"])
    assert config.grpo_training.max_steps == 7
    assert config.sft_training.learning_rate == 1e-5
    assert config.model.lora is None
    assert config.prompt.solution_start == "<ANS>"


def test_a_config_of_the_earlier_layout_loads_with_one_line_naming_what_moved(tmp_path, caplog):
    path = tmp_path / "c.yaml"  # a bare `no` is YAML 1.1's false: read as the word it was
    path.write_text("grpo_training:\n  eval_strategy: no\n  eval_steps: 7\n  trl: {top_entropy_quantile: 0.2}\n"
                    "vllm_sampling:\n  min_p: 0.0\n  temperature: 0.9\n"
                    "model:\n  random_state: 5\n  fast_inference: false\n  gpu_memory_utilization: 0.5\n")
    path.write_text(path.read_text().replace("grpo_training:\n", "grpo_training:\n  guided_completions: 4\n"))
    with caplog.at_level("WARNING", logger="llm_finetuning.config.migrate"):
        config = PipelineConfig.from_yaml(path)
    assert config.evaluation.grpo_every_steps is None  # eval_strategy: no wins over eval_steps
    assert config.rollout_sampling.min_p == 0.0 and config.grpo_training.temperature == 0.9
    assert config.grpo_training.top_entropy_quantile == 0.2
    (record,) = caplog.records
    assert "vllm_sampling.min_p -> grpo_training.min_p" in record.message and "\n" not in record.message
    assert "grpo_training.trl.top_entropy_quantile -> grpo_training.top_entropy_quantile" in record.message
    assert "model.random_state removed: the adapter is initialised from seed" in record.message
    assert "grpo_training.guided_completions removed: guidance puts one worked solution" in record.message
    assert (config.grpo_training.use_vllm, config.grpo_training.vllm_gpu_memory_utilization) == (False, 0.5)
    assert PipelineConfig.from_dict({"model": {"fast_inference": True}}).grpo_training.use_vllm is None
    steps = PipelineConfig.from_dict({"grpo_training": {"eval_steps": 7}})
    assert steps.evaluation.grpo_every_steps == 7
    caplog.clear()
    with caplog.at_level("WARNING", logger="llm_finetuning.config.migrate"):
        PipelineConfig.from_yaml(CONFIGS / "tiny.yaml")
    assert not caplog.records  # the shipped configs are in today's layout


def test_one_seed_makes_the_problems_unless_data_seed_pins_them():
    config = PipelineConfig.from_dict({"seed": 5})
    assert (config.data.seed, config.problem_seed) == (None, 5)
    assert config.with_overrides(["seed=9"]).problem_seed == 9  # followed after a reload, not frozen at 5
    pinned = config.with_overrides(["data.seed=7"])
    assert (pinned.problem_seed, pinned.with_overrides(["seed=9"]).problem_seed) == (7, 7)
    assert "random_state" not in {f.name for f in dataclasses.fields(config.model)}


def test_a_trl_field_keeps_trls_default_unless_ours_says_why():
    from trl import GRPOConfig, SFTConfig

    from llm_finetuning.config.trl_fields import GRPO_DEFAULTS, SFT_DEFAULTS

    config = PipelineConfig()
    for section, trl_class, ours in ((config.sft_training, SFTConfig, SFT_DEFAULTS),
                                     (config.grpo_training, GRPOConfig, GRPO_DEFAULTS)):  # fmt: skip
        for field in dataclasses.fields(trl_class):
            if field.name in ours:
                assert ours[field.name].value != field.default and ours[field.name].why  # no copy of TRL's
            elif field.default is not dataclasses.MISSING:
                assert getattr(section, field.name) == field.default, field.name
    assert config.grpo_training.loss_type == GRPOConfig.loss_type and config.grpo_training.beta == 0.0


def test_round_trip_through_yaml(tmp_path):
    config = PipelineConfig().with_overrides(["grpo_training.beta=0.1", "model.lora.rank=8"])
    path = tmp_path / "c.yaml"
    path.write_text(config.to_yaml())
    assert PipelineConfig.from_yaml(path) == config


BAD = [
    ({"grpo_training": {"num_generation": 4}},
     "grpo_training.num_generation: unknown key, ours or TRL's GRPOConfig's; did you mean num_generations?"),
    ({"grpo_training": {"curriculm": True}},
     "grpo_training.curriculm: unknown key, ours or TRL's GRPOConfig's; did you mean curriculum?"),
    ({"grpo_training": {"loss_type": "dapo", "beta": "high"}}, "grpo_training.beta: expected float (TRL's type)"),
    ({"modle": {}}, "modle: unknown key; did you mean model?"),
    ({"grpo_training": {"max_steps": "ten"}}, "grpo_training.max_steps: expected int (TRL's type), got 'ten' (str)"),
    ({"model": {"load_in_4bit": "yes"}}, "model.load_in_4bit: expected bool, got 'yes' (str)"),
    ({"grpo_training": {"loss_type": "gspo"}}, "grpo_training.loss_type: expected one of"),
    ({"grpo_training": {"num_generations": 1, "gradient_accumulation_steps": 1}},
     "grpo_training.num_generations: must be >= 2"),
    ({"grpo_training": {"num_generations": 3}}, "must be divisible by num_generations = 3"),
    ({"grpo_training": {"max_prompt_length": 1500, "max_completion_length": 1000}},
     "max_prompt_length + max_completion_length = 2500 exceeds model.max_seq_length = 2048"),
    ({"model": {"lora": {"rank": 0}}}, "model.lora.rank: must be > 0 (got 0)"),
    ({"sft_training": {"learning_rate": 0}}, "sft_training.learning_rate: must be > 0"),
    ({"grpo_training": {"learning_rate": -1e-5}}, "grpo_training.learning_rate: must be > 0"),
    ({"grpo_training": {"train_validation_split": 0}}, "grpo_training.train_validation_split: must be in (0, 1]"),
    ({"grpo_training": {"train_validation_split": 1.5}}, "grpo_training.train_validation_split: must be in (0, 1]"),
    ({"rewards": {"rewards": [{"name": "check_answers"}]}}, "unknown reward 'check_answers'"),
    ({"rewards": {"rewards": [{"name": "check_answer", "params": {"bogus": 1}}]}}, "unknown parameter 'bogus'"),
]


@pytest.mark.parametrize(("raw", "message"), BAD)
def test_bad_config_names_the_key(raw, message):
    with pytest.raises(ConfigError) as error:
        check_config(PipelineConfig.from_dict(raw))  # the names a config refers to: checked by their owners
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_run_and_the_commands_check_the_names_a_config_refers_to(tmp_path):
    """The config package knows its own fields only; ``pipeline.run`` and the command line check what the names
    refer to before anything is written or loaded."""
    from llm_finetuning.pipeline import run
    from llm_finetuning.tools.train import main

    unknown = {"output_dir": str(tmp_path / "run"), "rewards": {"rewards": [{"name": "check_answers"}]}}
    config = PipelineConfig.from_dict(unknown)  # the fields themselves are fine
    with pytest.raises(ConfigError, match="unknown reward 'check_answers'"):
        run(config)
    assert not (tmp_path / "run").exists()
    assert main(["--config", "tiny", "--set", f"output_dir={tmp_path / 'cli'}", "--set", "report_to=wandbb"]) == 2
    assert not (tmp_path / "cli").exists()


def test_train_validation_split_of_one_is_allowed():
    assert PipelineConfig.from_dict({"grpo_training": {"train_validation_split": 1.0}})


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        PipelineConfig.from_yaml(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        PipelineConfig.from_yaml(bad)


def test_malformed_override():
    with pytest.raises(ConfigError, match="expected section.field=value"):
        PipelineConfig().with_overrides(["grpo_training.max_steps"])


def test_every_field_has_help_text_readable_by_code():
    from llm_finetuning.config.explain import explain

    lines = explain(PipelineConfig()).splitlines()
    assert len(lines) > 80
    missing = [line for line in lines if "  # " not in line]
    assert missing == []


def test_help_config_lists_fields_with_values_from_the_config(capsys):
    from llm_finetuning.tools.train import main

    assert main(["--config", "configs/tiny.yaml", "--set", "grpo_training.beta=0.04", "--help-config"]) == 0
    out = capsys.readouterr().out
    assert "grpo_training.beta: float = 0.04  # KL coefficient" in out
    assert "model.model_name: str = 'builtin:tiny-qwen3'" in out


def test_num_threads_is_a_positive_count_or_null():
    assert PipelineConfig.from_dict({"num_threads": 2}).num_threads == 2
    assert PipelineConfig().num_threads is None
    with pytest.raises(ConfigError, match="num_threads: must be > 0"):
        PipelineConfig.from_dict({"num_threads": 0})


# Where the dataclass defaults differ from configs/default_config.yaml on purpose: the recipe is for one CUDA GPU
# with the gpu extra, the defaults must run on any machine.
RECIPE_ONLY = {
    "sft_training.optim": "adamw_8bit needs bitsandbytes (the gpu extra); the default optimizer runs everywhere",
    "grpo_training.optim": "as sft_training.optim",
    "evaluation.num_samples": "the recipe scores fewer problems, to keep a 4B model's evaluations short",
    "evaluation.sampled_k": "as evaluation.num_samples",
    "evaluation.batch_size": "the recipe's batch fits a 4B model's generation on one GPU",
    "data.sft.format": "the recipe names the schema; the default detects it from the columns",
    "data.grpo.format": "as data.sft.format",
}


def _leaves(raw: dict, prefix: str = "") -> dict:
    leaves = {}
    for key, value in raw.items():
        if isinstance(value, dict) and key != "params":
            leaves.update(_leaves(value, f"{prefix}{key}."))
        else:
            leaves[f"{prefix}{key}"] = value
    return leaves


def test_a_config_that_omits_a_field_trains_with_the_documented_recipes_value():
    """A YAML that leaves out ``lora`` (or any field the recipe sets) must train what the README describes."""
    recipe = _leaves(PipelineConfig.from_yaml(CONFIGS / "default_config.yaml").to_dict())
    config = PipelineConfig()
    defaults = _leaves(config.to_dict())
    for key in recipe.keys() - defaults.keys():  # a TRL field the recipe writes out: TRL's default by default
        section, _, name = key.partition(".")
        defaults[key] = getattr(getattr(config, section), name)
    differ = {key for key in recipe if recipe[key] != defaults.get(key)}
    assert differ == set(RECIPE_ONLY)
    assert (defaults["model.lora.rank"], defaults["model.lora.alpha"]) == (32, 64)


def _choices(cls, field):
    import typing

    return set(typing.get_args(typing.get_type_hints(cls)[field]))


def test_every_name_list_in_the_config_is_its_registrys():
    """config/ is the ground floor and cannot import the registries above it, so its lists of names are written
    out; this holds each to the registry it names (a new adapter, backend, grader, advantage mode or rollout
    kind fails here until the config's list has it)."""
    import typing

    from llm_finetuning.config import DatasetSpec, EvaluationConfig, ModelConfig
    from llm_finetuning.data.formats import ADAPTERS
    from llm_finetuning.grading import GRADERS
    from llm_finetuning.model.backend import Rollouts
    from llm_finetuning.model.backends import BACKENDS
    from llm_finetuning.rollout import ROLLOUTS
    from llm_finetuning.rollout.engines import ENGINES

    assert _choices(DatasetSpec, "format") == {"auto", *ADAPTERS}
    assert _choices(ModelConfig, "backend") == {"auto", *BACKENDS}
    assert _choices(PipelineConfig, "grader") == set(GRADERS)
    assert set(typing.get_args(Rollouts)) == set(ROLLOUTS)
    # "vllm" on the unsloth backend is Unsloth's own engine (generation.engines picks it): not a name to set
    assert _choices(EvaluationConfig, "engine") == {"auto", *ENGINES} - {"unsloth"}

