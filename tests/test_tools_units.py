"""The tools' pure parts on literal inputs: group figures, debug_grpo hints, export choices, error reporting."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from llm_finetuning.config import PipelineConfig
from llm_finetuning.errors import DataError, ModelError
from llm_finetuning.model import get_backend
from llm_finetuning.tools.common import default_adapter
from llm_finetuning.tools.debug_grpo import HINTS, HintContext, hints
from llm_finetuning.tools.export import config_for_adapter
from llm_finetuning.tools.group_stats import (
    distinct_share,
    group_figures,
    mean_pairwise_similarity,
    overall_figures,
    spread,
    tag_presence,
)
from llm_finetuning.tools.train import run_reporting_errors


@pytest.mark.parametrize(
    ("texts", "share"),
    [(["a", "a", "a", "a"], 0.25), (["a", "b", "a", "b"], 0.5), (["a", "b", "c", "d"], 1.0), ([], 0.0)],
)
def test_distinct_share(texts, share):
    assert distinct_share(texts) == share


@pytest.mark.parametrize(
    ("texts", "similarity"),
    [
        (["7 + 5 = 12", "7 + 5 = 12"], 1.0),
        (["a b c", "x y z"], 0.0),
        (["a b c d", "a b c e"], 0.75),
        (["only one"], 1.0),
    ],
)
def test_mean_pairwise_similarity_compares_whitespace_tokens(texts, similarity):
    assert mean_pairwise_similarity(texts) == similarity


def test_tag_presence_and_spread():
    assert tag_presence(["<S>1</S>", "<S>2", "3"], ["<S>", "</S>"]) == {"<S>": 0.6667, "</S>": 0.3333}
    assert spread([1.0, 1.0, 1.0]) == {"mean": 1.0, "std": 0.0}
    assert spread([0.0, 2.0]) == {"mean": 1.0, "std": 1.4142}  # sample std, as TRL's advantages use
    assert spread([3.0]) == {"mean": 3.0, "std": 0.0}


def test_group_figures_flag_zero_std_and_truncation():
    figures = group_figures(
        ["x", "x", "y", "z"],
        [True, False, True, True],
        ["<S>"],
        {"r": [1.0, 1.0, 1.0, 1.0]},
        [2.0, 2.0, 2.0, 2.0],
    )
    assert figures["distinct"] == 0.75 and figures["truncated"] == 0.25
    assert figures["rewards"] == {"r": {"mean": 1.0, "std": 0.0}}
    assert figures["zero_std"] is True


def test_overall_figures_average_the_groups():
    groups = [
        group_figures(["a", "a"], [True, True], ["<S>"], {"r": [0.0, 0.0]}, [0.0, 0.0]),
        group_figures(["<S>a", "b"], [True, False], ["<S>"], {"r": [0.0, 2.0]}, [0.0, 2.0]),
    ]
    overall = overall_figures(groups)
    assert overall["distinct"] == 0.75 and overall["zero_std_groups"] == 0.5
    assert overall["tags"] == {"<S>": 0.25} and overall["truncation_rate"] == 0.25
    assert overall["rewards"]["r"] == {"mean": 0.5, "std": 0.7071}


HEALTHY = {"distinct": 0.9, "tags": {"<SOLUTION>": 0.95}, "zero_std_groups": 0.1, "truncation_rate": 0.0}
CTX = HintContext(temperature=1.0, num_generations=4, max_new_tokens=24, trained=True)


@pytest.mark.parametrize(
    ("change", "context", "fired"),
    [
        ({}, {}, set()),
        ({}, {"temperature": 0.05}, {"low_temperature"}),
        ({"distinct": 0.25}, {}, {"identical_completions"}),
        ({"distinct": 0.4}, {}, {"identical_completions"}),
        ({"tags": {"<SOLUTION>": 0.3}}, {}, {"tags_missing"}),
        ({"zero_std_groups": 0.75}, {}, {"constant_rewards"}),
        ({"truncation_rate": 0.5}, {}, {"truncated"}),
    ],
    ids=["healthy", "cold", "identical", "low-diversity", "no-tags", "constant", "truncated"],
)
def test_each_hint_fires_on_its_symptom_only(change, context, fired):
    ctx = HintContext(**{**CTX.__dict__, **context})
    assert {hint["id"] for hint in hints({**HEALTHY, **change}, ctx)} == fired


def test_hints_registry_names_every_check():
    assert set(HINTS) == {
        "low_temperature",
        "identical_completions",
        "tags_missing",
        "constant_rewards",
        "truncated",
        "phantom_advantages",
        "all_wrong_groups",
        "truncated_sampling",
    }


def test_tags_missing_without_an_adapter_says_to_run_sft():
    ctx = HintContext(**{**CTX.__dict__, "trained": False})
    (hint,) = hints({**HEALTHY, "tags": {"<SOLUTION>": 0.0}}, ctx)
    assert "run SFT first" in hint["message"]


def test_config_for_adapter_follows_the_save_not_the_config(tmp_path):
    config = PipelineConfig.from_yaml("configs/tiny.yaml")  # lora: null
    lora_dir, full_dir = tmp_path / "lora", tmp_path / "full"
    lora_dir.mkdir()
    full_dir.mkdir()
    (lora_dir / "adapter_config.json").write_text(
        json.dumps({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj"]})
    )
    (full_dir / "config.json").write_text("{}")
    assert config_for_adapter(config, lora_dir).model.lora.rank == 4
    assert config_for_adapter(config, full_dir).model.uses_lora is False
    with_lora = config.with_overrides([]).replace(model=config_for_adapter(config, lora_dir).model)
    assert config_for_adapter(with_lora, full_dir).model.lora is None


def test_default_adapter_prefers_the_grpo_save_then_sft_final(tmp_path):
    config = PipelineConfig.from_yaml("configs/tiny.yaml", [f"output_dir={tmp_path}"])
    with pytest.raises(ModelError, match="pass --adapter PATH"):
        default_adapter(config)
    (tmp_path / "sft" / "final").mkdir(parents=True)
    assert default_adapter(config) == tmp_path / "sft" / "final"
    (tmp_path / "grpo_saved_lora").mkdir()
    assert default_adapter(config) == tmp_path / "grpo_saved_lora"
    assert default_adapter(config, prefer_grpo=False) == tmp_path / "sft" / "final"


def test_run_reporting_errors_prints_one_line_and_exits_2_but_keeps_bugs(capsys):
    def user_error() -> int:
        raise DataError("data.jsonl: no rows; point --data at a file")

    assert run_reporting_errors(user_error) == 2
    assert capsys.readouterr().err == "error: data.jsonl: no rows; point --data at a file\n"
    with pytest.raises(ZeroDivisionError):
        run_reporting_errors(lambda: 1 // 0)


@pytest.mark.parametrize("name", ["evaluate", "infer", "export"])
def test_each_tool_has_one_way_to_run_it_the_one_its_help_shows(name):
    import importlib
    import importlib.util

    tool = importlib.import_module(f"llm_finetuning.tools.{name}")
    assert tool.build_parser().prog == f"python -m llm_finetuning.tools.{name}"
    assert importlib.util.find_spec(f"llm_finetuning.{name}") is None  # no second name for the same command


def test_evaluate_takes_several_subsets_and_notes_a_merged_train_split():
    from llm_finetuning.tools.evaluate import build_parser, dataset_spec, render_table

    args = build_parser().parse_args(["--data", "EleutherAI/hendrycks_math", "--subset", "algebra,geometry"])
    assert dataset_spec(args).subset == ["algebra", "geometry"]
    assert dataset_spec(build_parser().parse_args(["--data", "openai/gsm8k", "--subset", "main"])).subset == "main"
    from llm_finetuning.data.loader import dataset_note

    metrics = {"k": 1, "n": 0, "adapter": None, "engine": "hf", "answer_accuracy": 0.0, "breakdowns": {},
               "data": {"name": "qwedsacf/competition_math", "split": "train",
                        "note": dataset_note("qwedsacf/competition_math")}}  # fmt: skip
    assert "note: has only a train split" in render_table(metrics)


class _GGUFModel:
    """Answers save_pretrained_gguf as unsloth 2026.10.9 does (unsloth/save.py): the merge in the directory
    asked for, the GGUF files in ``<directory>_gguf``, their paths in the returned ``gguf_files``."""

    def save_pretrained_gguf(self, directory, tokenizer, quantization_method):
        gguf_dir = Path(f"{directory}_gguf")
        gguf_dir.mkdir()
        files = [gguf_dir / f"model.{quantization_method.upper()}.gguf"]
        files[0].write_bytes(b"GGUF")
        return {"save_directory": directory, "gguf_directory": str(gguf_dir), "gguf_files": [str(f) for f in files]}


def test_gguf_export_reports_the_files_unsloth_wrote_not_the_directory_asked_for(tmp_path):
    unsloth = get_backend("unsloth")
    (written,) = unsloth.save_gguf(_GGUFModel(), None, tmp_path / "gguf", "q4_k_m")
    assert written == tmp_path / "gguf_gguf" / "model.Q4_K_M.gguf" and written.is_file()
    empty = SimpleNamespace(save_pretrained_gguf=lambda *a, **k: {"gguf_files": []})
    with pytest.raises(ModelError, match="Unsloth reported no GGUF file written"):
        unsloth.save_gguf(empty, None, tmp_path / "other", "q4_k_m")


def test_gguf_export_on_the_hf_backend_names_the_way_that_works():
    with pytest.raises(ModelError, match=r"^--gguf needs the Unsloth backend .* export --merged and convert it"):
        get_backend("hf").save_gguf(None, None, Path("unused"), "q4_k_m")
