"""run_training.py's command line: flags reach the config, and every user error is one line with exit 2."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llm_finetuning.tools.train import build_parser, main, resolve_config, resume_command

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny.yaml")


def test_print_config_exits_zero_with_yaml(capsys):
    assert main(["--config", TINY, "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["model_name"] == "builtin:tiny-qwen3"


def test_shortcuts_apply_to_the_phases_that_run():
    args = build_parser().parse_args(["--config", TINY, "--skip-sft", "--max-steps", "9", "--learning-rate", "3e-5"])
    config = resolve_config(args)
    assert config.grpo_training.max_steps == 9
    assert config.grpo_training.learning_rate == 3e-5
    assert config.sft_training.max_steps != 9


def test_set_and_output_dir(tmp_path):
    args = build_parser().parse_args(
        ["--config", TINY, "--set", "grpo_training.beta=0.04", "--output-dir", str(tmp_path)])
    config = resolve_config(args)
    assert config.grpo_training.beta == 0.04
    assert config.output_dir == str(tmp_path)


@pytest.mark.parametrize(("argv", "message"), [
    (["--set", "grpo_training.num_generation=4"], "did you mean num_generations?"),
    (["--set", "grpo_training.max_steps=ten"], "grpo_training.max_steps: expected int"),
    (["--set", "grpo_training.num_generations=1"], "num_generations: must be >= 2"),
    (["--set", "model.lora={rank: -1}"], "model.lora.rank: must be > 0"),
    (["--skip-sft", "--skip-grpo"], "leave nothing to run"),
])
def test_user_errors_are_one_line_exit_2(argv, message, capsys):
    assert main(["--config", TINY, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_expert_iteration_alone_skips_both_other_phases(capsys):
    assert main(["--config", TINY, "--skip-sft", "--skip-grpo", "--print-config",
                 "--set", "expert_iteration.rounds=2"]) == 0  # fmt: skip
    assert "rounds: 2" in capsys.readouterr().out


def test_missing_config_file(capsys):
    assert main(["--config", "no/such.yaml"]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_script_has_no_traceback_on_bad_config():
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_training.py"), "--config", TINY, "--set", "sft_training.learnin_rate=1"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "sft_training.learnin_rate: unknown key, ours or TRL's SFTConfig's; did you mean learning_rate?" in result.stderr


def test_resume_command_repeats_the_arguments():
    assert resume_command(["--config", "configs/tiny.yaml"]) == (
        "uv run python run_training.py --config configs/tiny.yaml --resume")
