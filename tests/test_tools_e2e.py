"""The tools on a really trained tiny model: debug_grpo, evaluate, infer and export.

One module fixture trains twice through ``pipeline.run``: a short full fine-tune of the tiny demo model
(SFT only; it learns the tag format), then a few LoRA steps on top of that model, so the tools meet both
kinds of save: a whole model (``sft/final`` of the first run) and a LoRA adapter (of the second).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY_YAML

from llm_finetuning.config import PipelineConfig
from llm_finetuning.pipeline import RunOptions, run
from llm_finetuning.tools import debug_grpo, evaluate, export, infer

pytestmark = pytest.mark.slow  # trains the tiny model (twice) in its module fixture

SHRINK = [
    "sft_training.max_steps=60",
    "sft_training.learning_rate=3e-3",
    "sft_training.save_steps=1000",
    "sft_training.logging_steps=20",
    "grpo_training.num_generations=4",
    "grpo_training.per_device_train_batch_size=8",
    "evaluation.enabled=false",
    "data.synthetic.num_train=1000",
    "data.synthetic.num_eval=24",
]
LORA = {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"]}
QUESTIONS = [
    "What is 3 + 4?",
    "What is 12 - 5?",
    "Tom has 6 apples. He gets 2 more. How many apples does Tom have now?",
]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A ~1M-parameter model gains nothing from intra-op threads, and on a busy CPU their spin-waits made each
    forward pass ~50x slower (measured: 1.46 s with 2 threads vs 0.027 s with 1 under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, one_thread):
    """``(full run dir, LoRA run dir)``, each with the resolved ``config.yaml`` and ``sft/final``."""
    root = tmp_path_factory.mktemp("tools")
    full = PipelineConfig.from_yaml(TINY_YAML, [*SHRINK, f"output_dir={root / 'full'}"])
    run(full, RunOptions(skip_grpo=True))
    raw = full.with_overrides([f"output_dir={root / 'lora'}", "sft_training.max_steps=4",
                               "sft_training.learning_rate=5e-3"]).to_dict()  # fmt: skip
    raw["model"].update(model_name=str(root / "full" / "sft" / "final"), lora=LORA)
    run(PipelineConfig.from_dict(raw), RunOptions(skip_grpo=True))
    return root / "full", root / "lora"


def _config(run_dir: Path) -> str:
    return str(run_dir / "config.yaml")


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def test_debug_grpo_json_reports_diversity_tags_rewards_and_truncation(runs, capsys, caplog):
    full, _ = runs
    with caplog.at_level("INFO", logger="llm_finetuning.reporting.progress"):
        assert debug_grpo.main(["--config", _config(full), "--num", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)  # the sample answers went to the log, not into the JSON
    shown = [m for m in caplog.messages if m.lstrip().startswith("problem ")]
    assert [m.split(":")[0].strip() for m in shown] == ["problem 0", "problem 1", "problem 2"]
    firsts = [" ".join(group["completions"][0].split())[:20] for group in report["prompts"]]  # on one line
    assert all(first in message for message, first in zip(shown, firsts, strict=True))
    assert report["settings"]["adapter"] == str(full / "sft" / "final")  # the SFT adapter by default
    assert len(report["prompts"]) == 3
    for group in report["prompts"]:
        assert len(group["completions"]) == 4
        assert 0.25 <= group["distinct"] <= 1 and 0 <= group["similarity"] <= 1
        assert set(group["rewards"]) == {"match_format_exactly", "match_format_approximately", "check_answer",
                                         "check_numbers"}  # fmt: skip
        assert all(set(spread) == {"mean", "std"} for spread in group["rewards"].values())
    overall = report["overall"]
    assert set(overall) >= {"distinct", "similarity", "tags", "rewards", "zero_std_groups", "truncation_rate"}
    assert set(overall["tags"]) == {
        "<end_working_out>",
        "<SOLUTION>",
        "</SOLUTION>",
    }  # the start tag is prefilled
    assert overall["tags"]["<SOLUTION>"] >= 0.5  # SFT taught the format
    assert "low_temperature" not in {hint["id"] for hint in report["hints"]}


def test_debug_grpo_flags_a_temperature_near_zero(runs, capsys):
    full, _ = runs
    argv = ["--config", _config(full), "--num", "2", "--json", "--set", "grpo_training.temperature=0.01"]
    assert debug_grpo.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    hints = {hint["id"]: hint["message"] for hint in report["hints"]}
    assert "temperature 0.01 is too low" in hints["low_temperature"]
    assert report["overall"]["distinct"] <= 0.5  # near-greedy: the group's samples coincide


def test_debug_grpo_prints_a_table_with_hints_by_default(runs, capsys):
    _, lora = runs
    argv = ["--config", _config(lora), "--prompt", "What is 3 + 4?", "--answer", "7", "--set",
            "grpo_training.temperature=0.2"]  # fmt: skip
    assert debug_grpo.main(argv) == 0
    out = capsys.readouterr().out
    assert "distinct" in out and "check_answer" in out and "hint: temperature 0.2 is too low" in out


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    """40 MATH-style rows (problem, solution, answer, subject, level) of the demo's arithmetic."""
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    rows = []
    for i in range(40):
        a, b = 3 + i % 9, i % 4
        op, value = ("+", a + b) if i % 2 == 0 else ("-", a - b)
        subject = "addition" if op == "+" else "subtraction"
        rows.append({"problem": f"What is {a} {op} {b}?", "solution": f"{a} {op} {b} = {value}. \\boxed{{{value}}}",
                     "answer": str(value), "subject": subject, "level": 1 + i % 2})  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_evaluate_writes_a_result_row_per_problem_and_a_per_subject_breakdown(
    runs, benchmark, tmp_path, capsys
):
    full, _ = runs
    out = tmp_path / "eval"
    argv = ["--config", _config(full), "--adapter", str(full / "sft" / "final"), "--data", str(benchmark),
            "--output-dir", str(out)]  # fmt: skip
    assert evaluate.main(argv) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 40
    first = results[0]
    assert set(first) >= {
        "prompt",
        "completions",
        "extracted_answers",
        "gold",
        "correct",
        "rewards",
        "subject",
    }
    assert len(first["completions"]) == 1 and first["prompt"].startswith("What is")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == 40 and metrics["k"] == 1
    assert "pass@1" not in metrics  # greedy: one completion per problem, pass@1 is answer_accuracy
    assert metrics["answer_accuracy"] == round(sum(r["correct"][0] for r in results) / 40, 4)
    assert metrics["format_accuracy"] >= 0.5
    subjects = metrics["breakdowns"]["subject"]
    assert set(subjects) == {"addition", "subtraction"}
    assert subjects["addition"]["n"] == subjects["subtraction"]["n"] == 20
    assert set(metrics["breakdowns"]["level"]) == {"1", "2"}
    table = capsys.readouterr().out
    assert "answer_accuracy" in table and "addition" in table and "(test split)" in table


def test_evaluate_with_k_samples_reports_pass_at_k(runs, benchmark, tmp_path):
    _, lora = runs
    out = tmp_path / "eval"
    argv = ["--config", _config(lora), "--adapter", str(lora / "sft" / "final"), "--data", str(benchmark),
            "--max-samples", "6", "--k", "3", "--output-dir", str(out)]  # fmt: skip
    assert evaluate.main(argv) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6 and all(len(r["completions"]) == len(r["correct"]) == 3 for r in results)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pass@3"] == round(sum(any(r["correct"]) for r in results) / 6, 4)
    assert metrics["pass@3"] >= metrics["answer_accuracy"]


def test_evaluate_defaults_to_the_base_model_on_the_runs_held_out_problems(runs, tmp_path, capsys, caplog):
    from llm_finetuning.data import load_grpo_data
    from llm_finetuning.tools.common import load_model

    full, _ = runs
    bases = sorted((full / ".tiny_base").iterdir())
    argv = ["--config", _config(full), "--max-samples", "4", "--output-dir", str(tmp_path / "eval")]
    assert evaluate.main(argv) == 0
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["adapter"] is None and metrics["n"] == 4
    assert metrics["data"]["name"] == "synthetic:arithmetic" and metrics["data"]["split"] == "held-out"
    assert "(held-out split)" in capsys.readouterr().out
    assert sum(m.lstrip().startswith("problem ") for m in caplog.messages) == 3  # evaluation.sample_answers
    # the problems scored are the pipeline's held-out ones (the GRPO validation rows), never training rows
    config = PipelineConfig.from_yaml(_config(full))
    loaded = load_model(config, None)
    validation = load_grpo_data(config, loaded.manager.tokenizer).validation
    loaded.free()
    scored = [json.loads(line)["prompt"] for line in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()]
    assert scored == [row["prompt"][-1]["content"] for row in validation.select(range(4))]
    assert sorted((full / ".tiny_base").iterdir()) == bases  # the run's own base model, not a rebuilt one


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "the file is empty"),
        ('{"foo": 1}\n{"foo": 2}\n', "cannot tell the dataset format from its columns"),
    ],
    ids=["empty", "no-usable-columns"],
)
def test_evaluate_refuses_a_bad_file_in_one_line(runs, tmp_path, capsys, content, fragment):
    full, _ = runs
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    argv = ["--config", _config(full), "--data", str(bad), "--output-dir", str(tmp_path / "out")]
    assert evaluate.main(argv) == 2
    captured = capsys.readouterr()
    (line,) = _error_lines(captured.err)
    assert str(bad) in line and fragment in line
    assert "Traceback" not in captured.err and not (tmp_path / "out").exists()


def test_infer_prints_the_answer_that_solve_returns(runs, capsys):
    _, lora = runs
    assert infer.main(["--config", _config(lora), QUESTIONS[0]]) == 0  # default: the run's sft/final adapter
    printed = capsys.readouterr().out
    model = infer.load_trained(_config(lora))
    try:
        reasoning, answer = model.solve(QUESTIONS[0])
    finally:
        model.free()
    assert answer is not None and answer.strip()
    # the working spans several lines (one per column), so compare whole printed blocks
    assert f"reasoning: {reasoning}\nanswer: {answer}\n" in printed


def test_merged_export_reloads_and_matches_base_plus_adapter(runs, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_finetuning.data.processor import conversation
    from llm_finetuning.rollout import SamplingSettings, generate_completions
    from llm_finetuning.tools.common import load_model

    full, lora = runs
    adapter, merged_dir = lora / "sft" / "final", tmp_path / "merged"
    assert (adapter / "adapter_config.json").is_file()
    assert (
        export.main(["--config", _config(lora), "--adapter", str(adapter), "--merged", str(merged_dir)]) == 0
    )
    assert f"merged: {merged_dir}" in capsys.readouterr().out

    config = PipelineConfig.from_yaml(_config(lora))
    prompts = [conversation(config.prompt.system_prompt, question) for question in QUESTIONS]
    greedy = SamplingSettings(greedy=True, max_new_tokens=24)
    with_adapter = load_model(config, adapter).manager
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(merged_dir))
    tokenizer.padding_side = "left"
    expected = generate_completions(with_adapter.model, with_adapter.tokenizer, prompts, greedy)
    assert generate_completions(merged, tokenizer, prompts, greedy) == expected

    inputs = tokenizer(QUESTIONS[:1], return_tensors="pt")
    base = AutoModelForCausalLM.from_pretrained(str(full / "sft" / "final"), dtype=torch.float32).eval()
    with torch.no_grad():
        adapted, merged_logits, base_logits = (m(**inputs).logits for m in (with_adapter.model, merged, base))
    with_adapter.free()
    torch.testing.assert_close(merged_logits, adapted, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(base_logits, adapted, atol=1e-4)  # the LoRA steps changed the model


def test_export_to_the_hub_offline_stops_in_one_line_before_any_work(runs, tmp_path, capsys, monkeypatch):
    _, lora = runs
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = [
        "--config",
        _config(lora),
        "--merged",
        str(tmp_path / "merged"),
        "--push-to-hub",
        "someone/tiny-math",
    ]
    assert export.main(argv) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "--push-to-hub someone/tiny-math" in line and "HF_HUB_OFFLINE" in line
    assert not (tmp_path / "merged").exists()


def test_gguf_export_needs_the_unsloth_backend(runs, tmp_path, capsys):
    _, lora = runs
    assert export.main(["--config", _config(lora), "--gguf", str(tmp_path / "gguf")]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "--gguf needs the Unsloth backend" in line
