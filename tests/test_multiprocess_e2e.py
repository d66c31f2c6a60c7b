"""Two CPU processes through the whole pipeline: ``accelerate launch --config_file configs/accelerate/cpu.yaml``.

The launch the README gives laptop users, shortened: two ranks over gloo, one thread each, SFT → GRPO, stopped
by SIGTERM to the launcher during GRPO and resumed under the same launch to the final step. Then the outputs
are checked: one writer, a complete summary, identical weights on both ranks, an adapter that reloads, and
evaluation figures equal to a single-process evaluation of the same problems.

One writer is checked from the processes themselves: a ``sitecustomize`` on the workers' path installs an
audit hook (``sys.addaudithook``) that records every file each process opens for writing, renames, creates
or deletes under the output directory.

Its own CI lane (about 3 minutes on 2 cores), deselected from the README's ``uv run pytest``:

    uv run pytest -m multiprocess
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import GREEDY_FIGURES, ROOT, SIMPLE_SUMS, evaluate_alone, launch_command, launch_env

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

CPU_CONFIG = ROOT / "configs" / "accelerate" / "cpu.yaml"
FINAL_STEP = 16
SCHEDULE = [  # the demo's model; enough SFT that completions have a format to compare
    "sft_training.max_steps=60", "sft_training.learning_rate=3e-3", "sft_training.save_steps=30",
    "sft_training.logging_steps=20", "data.synthetic.num_train=1000",
    f"grpo_training.max_steps={FINAL_STEP}", "grpo_training.save_steps=2", "evaluation.grpo_every_steps=4",
    "grpo_training.per_device_train_batch_size=8",  # x 2 processes = 16 completions: 4 prompts x 4
    "grpo_training.num_generations=4", "grpo_training.max_completion_length=20",
    "evaluation.num_samples=24", "evaluation.sampled_k=2", "evaluation.batch_size=5",  # 5 batches: uneven shares
    "data.synthetic.num_eval=24",
    "grpo_training.curriculum=true",  # each step's draw made from the state both ranks share, resumed from its save
    "grpo_training.oversample=2", "grpo_training.drop_silent_groups=true",  # ranks whose groups that teach differ
    "grpo_training.sft_anchor=0.5", "grpo_training.sft_anchor_rows=2",  # a second forward before DDP's backward
    *SIMPLE_SUMS,
]
# What a rank other than the main one may write: its own part of the Trainer's checkpoints.
OTHER_RANK_MAY_WRITE = re.compile(r"^(sft|grpo)/checkpoint-\d+(/rng_state_1\.pth)?$")

AUDIT_HOOK = """
import os, sys
_ROOT = os.environ["WRITE_AUDIT_ROOT"]
_LOG = open(os.path.join(os.environ["WRITE_AUDIT_DIR"], f"writes-{os.environ.get('RANK', 'launcher')}-{os.getpid()}.tsv"),
            "a", buffering=1)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def _path(value):
    try:
        return os.path.abspath(os.fsdecode(value))
    except TypeError:
        return None

def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        paths = [_path(path)] if writes else []
    elif event in ("os.rename", "os.remove", "os.mkdir", "os.rmdir", "shutil.rmtree"):
        paths = [_path(args[0])] + ([_path(args[1])] if event == "os.rename" else [])
    else:
        return
    for path in paths:
        if path and path.startswith(_ROOT):
            _LOG.write(f"{event}\\t{path}\\n")

sys.addaudithook(_hook)
"""


def _launch(output_dir: Path, audit_dir: Path, *extra: str) -> subprocess.Popen:
    sitecustomize = audit_dir / "site"
    sitecustomize.mkdir(exist_ok=True)
    (sitecustomize / "sitecustomize.py").write_text(textwrap.dedent(AUDIT_HOOK))
    env = launch_env(PYTHONPATH=os.pathsep.join([str(sitecustomize), os.environ.get("PYTHONPATH", "")]),
                     WRITE_AUDIT_ROOT=str(output_dir), WRITE_AUDIT_DIR=str(audit_dir))
    command = launch_command(CPU_CONFIG, output_dir, SCHEDULE, *extra)
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the launch ended before {path} appeared"
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """A 2-process run stopped by SIGTERM during GRPO and resumed to the end; its output dir and audit."""
    output_dir, audit_dir = tmp_path_factory.mktemp("run"), tmp_path_factory.mktemp("audit")
    started = time.monotonic()
    first = _launch(output_dir, audit_dir)
    try:
        _wait_for(output_dir / "grpo" / "checkpoint-2" / "checkpoint_complete.json", first, timeout=400)
    finally:
        first.send_signal(signal.SIGTERM)  # to the launcher, as a scheduler or a terminal would
    interrupted_log, _ = first.communicate(timeout=180)
    interrupted = json.loads((output_dir / "summary.json").read_text())
    interrupted["checkpoints"] = {  # as the stop left them (the resumed run rotates them away)
        path.name: sorted(p.name for p in path.iterdir()) for path in (output_dir / "grpo").glob("checkpoint-*")}
    resumed = _launch(output_dir, audit_dir, "--resume")
    resumed_log, _ = resumed.communicate(timeout=400)
    assert resumed.returncode == 0, resumed_log[-3000:]
    print(f"two-process launches: {time.monotonic() - started:.0f} s")
    return output_dir, audit_dir, interrupted, interrupted_log


def _writes(audit_dir: Path, output_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """Per writer ('0', '1', 'launcher'): (event, path relative to the output dir) in order."""
    writes: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for log in audit_dir.glob("writes-*.tsv"):
        writer = log.name.split("-")[1]
        for line in log.read_text().splitlines():
            event, path = line.split("\t")
            writes[writer].append((event, os.path.relpath(path, output_dir)))
    return writes


def test_sigterm_stops_both_ranks_after_the_same_step_with_one_checkpoint(two_process_run):
    _, _, interrupted, log = two_process_run
    assert interrupted["complete"] is False and interrupted["eval"]["after_sft"] is not None
    stopped = re.findall(r"grpo stopped at step (\d+)", log)
    assert len(stopped) == 1, log[-3000:]  # the main process says it, once
    assert "Resume with: uv run accelerate launch" in log
    assert len(re.findall(r"SIGTERM received", log)) == 2  # each rank heard the signal
    last = max(interrupted["checkpoints"], key=lambda name: int(name.split("-")[1]))
    assert last == f"checkpoint-{stopped[0]}"  # the step both ranks stopped after, saved by both
    assert {"checkpoint_complete.json", "rng_state_0.pth", "rng_state_1.pth", "optimizer.pt",
            "model.safetensors"} <= set(interrupted["checkpoints"][last])


def test_only_the_main_process_shows_progress_and_sample_answers(two_process_run):
    *_, log = two_process_run  # the first launch, through a pipe
    lines = log.splitlines()
    assert lines.count("SFT: 60 steps") == 1 and sum(line.startswith("SFT 20/60, ") for line in lines) == 1
    evaluations = [line for line in lines if re.match(r"eval \S+: n=24 ", line)]
    assert len(evaluations) >= 2  # before and after SFT (the stop may come before GRPO's first)
    assert sum(line.startswith("  problem 0: ") for line in lines) == len(evaluations)  # once per evaluation
    assert "%|" not in log and "{'loss'" not in log and "Writing model shards" not in log
    assert all("warning" in line for line in lines if line.startswith("[rank 1]"))  # the other: warnings only


def test_resume_under_the_same_launch_reaches_the_final_step(two_process_run):
    output_dir, _, interrupted, _ = two_process_run
    summary = json.loads((output_dir / "summary.json").read_text())
    assert summary["complete"] is True
    assert summary["processes"] == {"num_processes": 2, "launcher": "accelerate", "zero_stage": None}
    assert summary["phases"]["grpo"]["steps"] == FINAL_STEP
    assert re.search(r"grpo/checkpoint-\d+$", summary["phases"]["grpo"]["resumed_from"])
    assert summary["phases"]["sft"] == interrupted["phases"]["sft"]  # SFT had finished: not run again
    for stage in ("before_sft", "after_sft", "after_grpo"):
        assert set(GREEDY_FIGURES) <= set(summary["eval"][stage]), stage


def test_both_ranks_end_with_identical_weights(two_process_run):
    output_dir, *_ = two_process_run
    phases = json.loads((output_dir / "summary.json").read_text())["phases"]
    for phase in ("sft", "grpo"):
        checksums = phases[phase]["weight_checksums"]
        assert len(checksums) == 2 and checksums[0] == checksums[1], phase  # one per rank, DDP kept them equal
    assert phases["sft"]["weight_checksums"] != phases["grpo"]["weight_checksums"]  # GRPO changed the weights


def test_the_curriculum_state_survives_the_stop_and_counts_every_step(two_process_run):
    output_dir, _, interrupted, _ = two_process_run
    assert any("curriculum.json" in files for files in interrupted["checkpoints"].values())
    newest = max((output_dir / "grpo").glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    state = json.loads((newest / "curriculum.json").read_text())
    assert state["draws"] == int(newest.name.split("-")[1])  # restored on resume: no step drawn twice or lost
    assert sum(state["cursor"].values()) == state["draws"] * 2 * 2 * 2  # 2 prompts x oversample 2 on each of 2 ranks


def test_without_silent_groups_both_ranks_train_on_batches_of_one_size(two_process_run):
    output_dir, *_ = two_process_run
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in records if record["phase"] == "grpo" and "groups/trained" in record]
    assert steps and steps[-1]["step"] == FINAL_STEP
    for record in steps:  # of 4 groups a rank generated, at most the 2 it trains (a record averages its steps)
        assert 1 <= record["groups/trained"] <= 2
        assert record["groups/trained_signal"] > 0 or record["groups/signal"] == 0


def test_only_the_main_process_writes(two_process_run):
    output_dir, audit_dir, *_ = two_process_run
    writes = _writes(audit_dir, output_dir)
    assert set(writes) <= {"0", "1", "launcher"}  # every process of both launches reported (a rank's children too)
    assert not writes["launcher"]
    other = {path for _, path in writes["1"]}
    assert other and all(OTHER_RANK_MAY_WRITE.match(path) for path in other), sorted(other)
    main = [path for _, path in writes["0"]]
    for name in ("training.log", "config.yaml", "metrics.jsonl", "summary.json", "run_state.json",
                 "plots/training.png"):
        assert name in main, name
    renamed_into = [path for event, path in writes["0"] if event == "os.rename"]
    assert renamed_into.count("sft/final") == 1 and renamed_into.count("grpo_saved_lora") == 1  # saved once
    stray = [p for p in output_dir.rglob("*") if ".tmp" in p.name or p.name.endswith(".previous")]
    assert not stray
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    keys = [(r["phase"], r["step"], r.get("stage"), r.get("index"), r.get("loss"), r.get("reward"))
            for r in records]  # fmt: skip
    assert len(keys) == len(set(keys))  # no record written twice
    assert "[rank 1]" not in (output_dir / "training.log").read_text()


def test_adapter_reloads_and_scores_as_one_process_would(two_process_run):
    output_dir, *_ = two_process_run
    alone = evaluate_alone(output_dir, "grpo_saved_lora")
    shared = json.loads((output_dir / "summary.json").read_text())["eval"]["after_grpo"]
    assert alone == {key: shared[key] for key in GREEDY_FIGURES}  # sharded over 2 ranks = one process
    assert alone["format_accuracy"] > 0  # the completions compared are formatted answers, not noise
