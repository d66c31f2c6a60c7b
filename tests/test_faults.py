"""Fault injection: kill -9 at chosen points, a full disk, two runs on one folder, hostile completions.

The promise (docs/guarantees.md): whatever kills a run, ``--resume`` finishes it with a complete adapter and a
summary that parses, and nothing a finished stage wrote is lost; a full disk leaves the previous save intact and
says so in one line; a second run on a folder in use is refused; no completion makes a reward raise, overrun
its deadline or write a file.

The kill points (``tests/fault_injection.py``) are drawn by a fixed seed: the process SIGKILLs itself the N-th
time it enters a training step, a checkpoint's state or weights write, a rename, an fsync, a metrics line, an
evaluation or an adapter save. Each chain starts a fresh run in its own folder and resumes it after every kill
until a resume runs to the end. Run with ``uv run pytest -m faults -rs`` (CI does); about 6 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, SIMPLE_SUMS, SMALL_MODEL, TINY_YAML

pytestmark = pytest.mark.faults

SEED = 20261125
CHAINS, KILLS_PER_CHAIN = 8, 6  # 48 kill points drawn; the suite requires at least 20 of them reached
SCHEDULE = [
    *SMALL_MODEL, *SIMPLE_SUMS,
    "sft_training.max_steps=12", "sft_training.save_steps=4", "sft_training.logging_steps=4",
    "grpo_training.max_steps=6", "grpo_training.save_steps=2", "evaluation.grpo_every_steps=3",
    "grpo_training.per_device_train_batch_size=8", "grpo_training.num_generations=4",
    "grpo_training.max_completion_length=16", "grpo_training.logging_steps=1",
    "evaluation.num_samples=8", "evaluation.sampled_k=1", "evaluation.batch_size=8", "data.synthetic.num_eval=8",
]  # fmt: skip
# kill point -> the occurrences a draw picks from (each reachable within one process of this schedule)
KILL_POINTS = {"sft_step": 12, "grpo_step": 6, "torch_save": 8, "weights_write": 6, "rename": 20, "fsync": 20,
               "metrics_line": 25, "evaluation": 4, "adapter_save": 2}  # fmt: skip
KILLED = -9


class Runs:
    """The fork server of ``fault_injection.py``: each run forked from one process that imported the libraries."""

    def __init__(self, logs: Path) -> None:
        self.logs, self.count = logs, 0
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self.server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fault_injection.py")], cwd=ROOT, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert "ready" in json.loads(self.server.stdout.readline())

    def run(self, point: str, count: int, output_dir: Path, *extra: str) -> tuple[int, str]:
        """The exit status (``KILLED`` where the kill point was reached) and the console of one run."""
        overrides = [arg for item in SCHEDULE for arg in ("--set", item)]
        args = ["--config", str(TINY_YAML), "--output-dir", str(output_dir), *overrides, *extra]
        self.count += 1
        log = self.logs / f"{self.count:03d}-{output_dir.name}-{point}-{count}.log"
        self.server.stdin.write(json.dumps({"point": point, "count": count, "args": args, "log": str(log)}) + "\n")
        self.server.stdin.flush()
        status = json.loads(self.server.stdout.readline())["status"]
        return status, log.read_text(errors="replace")

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=60)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    server = Runs(tmp_path_factory.mktemp("fault_logs"))
    yield server
    server.close()


def readable_save(folder: Path) -> bool:
    """A complete save: its config parses, its weights load, and it carries the save marker (written last)."""
    from safetensors import safe_open

    from llm_finetuning.model.adapters import SAVE_MARKER

    lora = (folder / "adapter_config.json").is_file()  # the demo fine-tunes its tiny model fully
    try:
        json.loads((folder / ("adapter_config.json" if lora else "config.json")).read_text())
        with safe_open(str(folder / ("adapter_model.safetensors" if lora else "model.safetensors")), "pt") as weights:
            keys = list(weights.keys())
    except (OSError, ValueError):
        return False
    return bool(keys) and (folder / SAVE_MARKER).is_file()


def stage_record(output_dir: Path) -> dict:
    """What the folder holds of finished stages: every file that is there must parse."""
    record = {}
    for name in ("summary.json", "run_state.json"):
        path = output_dir / name
        if path.exists():
            record[name] = json.loads(path.read_text())  # a summary cut short would raise here
    state = record.get("run_state.json", {})
    if state.get("sft", {}).get("done"):
        final = output_dir / "sft" / "final"
        previous = final.parent / ".final.previous"  # a swap cut between its renames: recovered on the next load
        assert readable_save(final) or readable_save(previous), "sft/final lost after SFT was done"
    return record


def test_kill_9_anywhere_then_resume_finishes_every_run(runs, tmp_path):
    rng = random.Random(SEED)
    tried = reached = completed = 0
    took_over_lock = False
    for chain in range(CHAINS):
        output_dir = tmp_path / f"chain-{chain}"
        evaluations: set[str] = set()
        for attempt in range(KILLS_PER_CHAIN + 1):
            point = rng.choice(sorted(KILL_POINTS)) if attempt < KILLS_PER_CHAIN else "none"
            count = rng.randint(1, KILL_POINTS[point]) if point != "none" else 0
            status, console = runs.run(point, count, output_dir, *(["--resume"] if attempt else []))
            tried += point != "none"
            record = stage_record(output_dir)
            kept = {k for k, v in record.get("summary.json", {}).get("eval", {}).items() if v}
            assert evaluations <= kept, f"{point} #{count} lost the evaluations {evaluations - kept}"
            evaluations = kept
            if status == KILLED:
                reached += 1
                continue
            assert status == 0 and "Traceback" not in console, f"chain {chain}, {point} #{count}:\n{console[-3000:]}"
            break
        summary = json.loads((output_dir / "summary.json").read_text())
        assert summary["complete"] is True and summary["phases"]["grpo"]["steps"] == 6
        assert summary["eval"]["after_grpo"] is not None
        assert readable_save(output_dir / "grpo_saved_lora") and readable_save(output_dir / "sft" / "final")
        took_over_lock |= "took over the lock" in (output_dir / "training.log").read_text()
        completed += 1
    print(f"\nfault injection: {tried} kill points drawn, {reached} reached (the process killed there), "
          f"every resume completed: {completed} of {CHAINS} runs finished")  # fmt: skip
    assert completed == CHAINS and reached >= 20
    assert took_over_lock  # a killed run's lock is taken over, and the log says so


def test_a_second_run_on_a_folder_in_use_is_refused(runs, tmp_path):
    overrides = [arg for item in SCHEDULE for arg in ("--set", item)]
    first = subprocess.Popen(
        [sys.executable, str(ROOT / "run_training.py"), "--config", str(TINY_YAML), "--output-dir", str(tmp_path),
         *overrides, "--set", "sft_training.max_steps=400"],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        lock = tmp_path / ".run.lock"
        deadline = time.monotonic() + 120
        while not (lock.exists() and str(first.pid) in lock.read_text()):
            assert time.monotonic() < deadline and first.poll() is None, "the first run never took the lock"
            time.sleep(0.2)
        status, console = runs.run("none", 0, tmp_path)
        assert status == 2
        lines = console.strip().splitlines()
        assert len(lines) == 1 and "is in use by another run" in lines[0] and str(first.pid) in lines[0], lines
    finally:
        first.kill()
        first.wait()


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs, made and removed here; skipped where this machine cannot mount one (not root)."""
    folder = tmp_path / "small_disk"
    if not _mount_tmpfs(folder, "24m"):
        pytest.skip("cannot mount a tmpfs here (needs root): the full-disk cases did not run")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30, check=False)


def fill(disk: Path, leave_bytes: int) -> None:
    """Write a ballast file that leaves about ``leave_bytes`` free on ``disk``."""
    free = shutil.disk_usage(disk).free
    with open(disk / "ballast", "wb") as handle:
        handle.truncate(0)
        chunk = b"\0" * (1 << 20)
        remaining = max(0, free - leave_bytes)
        while remaining > 0:
            handle.write(chunk[: min(len(chunk), remaining)])
            remaining -= len(chunk)


def test_a_full_disk_during_a_save_keeps_the_previous_save(small_disk, tiny_config):
    from llm_finetuning.session import Session

    manager = Session.open(tiny_config()).manager
    manager.load()
    target = small_disk / "adapter"
    manager.save_adapter(target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    fill(small_disk, leave_bytes=16 << 10)
    with pytest.raises(OSError) as failure:
        manager.save_adapter(target)
    assert failure.value.errno == 28  # ENOSPC
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before  # the previous save, untouched
    assert [p.name for p in small_disk.iterdir() if p.name.startswith(".")] == []  # no staging left behind


def test_a_full_disk_stops_the_run_with_one_line(runs, small_disk):
    fill(small_disk, leave_bytes=64 << 10)
    status, console = runs.run("none", 0, small_disk / "run")
    lines = console.strip().splitlines()
    assert status == 2, console[-3000:]
    assert lines[-1].startswith("error: ") and "no space left" in lines[-1] and "Traceback" not in console
    assert [line for line in lines if line.startswith("error")] == [lines[-1]]  # one line, the last
    assert f"cannot write a file in {small_disk / 'run'}" in lines[-1] and "free space" in lines[-1]  # where, the fix


def test_resume_never_continues_an_earlier_runs_checkpoints(runs, tmp_path):
    assert runs.run("none", 0, tmp_path)[0] == 0  # an earlier run, finished: grpo/checkpoint-6 is its
    assert runs.run("grpo_step", 1, tmp_path)[0] == KILLED  # a fresh run in the same folder, killed in GRPO
    status, console = runs.run("none", 0, tmp_path, "--resume")
    assert status == 0, console[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["phases"]["grpo"]["steps"] == 6 and summary["phases"]["grpo"].get("resumed_from") is None
    assert "no complete checkpoint of this run" in console
    assert (tmp_path / "previous_run" / "grpo" / "checkpoint-6").is_dir()  # the earlier run's, set aside


def test_ctrl_c_outside_a_training_phase_says_so_and_how_to_resume_and_exits_130(tmp_path):
    import signal

    overrides = [arg for item in SCHEDULE for arg in ("--set", item)]
    # A background job of a non-interactive shell (a CI script's `cmd &`) starts with SIGINT ignored, and an
    # ignored signal stays ignored across exec: the run would rightly carry on through the Ctrl-C. A handled
    # one is reset to its default there, so the run starts as a terminal's would.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "run_training.py"), "--config", str(TINY_YAML), "--output-dir",
             str(tmp_path), *overrides, "--set", "data.synthetic.num_train=60000"],  # data: outside any phase
            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, inherited)
    log = tmp_path / "training.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "trainable" in log.read_text()):  # the model is loaded; the data comes next
        assert time.monotonic() < deadline and process.poll() is None, "the run never loaded its model"
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    said, resume = stderr.strip().splitlines()[-2:]  # two lines: what happened, then the command
    assert said == "interrupted outside a training phase; every save made so far is intact"
    assert resume.startswith("Resume with: ") and "--resume" in resume
    assert json.loads((tmp_path / "summary.json").read_text())["complete"] is False


HOSTILE_CODE = [
    "__import__('os').system('touch {target}')",
    "open('{target}', 'w').write('x')",
    "__import__('subprocess').run(['touch', '{target}'])",
    "9**9**9**9",
    "[0] * 10**10",
    "\\binom{\\binom{10^{1000}}{2000}}{50}",
    "Final answer" + " " * 15_000 + "x",
    "(10^{9})!",
]


def test_hostile_completions_through_every_reward_write_nothing_and_keep_their_deadline(tmp_path):
    from test_rewards_fuzz import HOSTILE

    from llm_finetuning.rewards import available_rewards, get_reward
    from llm_finetuning.tasks.gym import entry_ref, package_problem

    target = tmp_path / "written"
    texts = [*HOSTILE, *(code.replace("{target}", str(target)) for code in HOSTILE_CODE)]
    completions = [f"<end_working_out><SOLUTION>{t}</SOLUTION>" for t in texts] + texts
    names = [name for name in available_rewards() if name != "reasoning_gym" or package_problem() is None]
    spiral = entry_ref("spiral_matrix", {}, seed=1, size=1, index=0) if "reasoning_gym" in names else None
    deadline_s = 5.0  # every reward's own bound (the grader's sympy budget, the verifier's timeout) is below it
    for name in names:
        reward = get_reward(name, **({"timeout": 1.0} if name == "reasoning_gym" else {}))
        reward.start()
        for completion in completions:
            reward(completions=["<SOLUTION>1</SOLUTION>"], answer=["4"], reasoning_gym_entry=[spiral])  # a worker
            started = time.perf_counter()  # ready (a replaced one has started): the time is the answer's own
            scores = reward(completions=[completion], answer=["4"], reasoning_gym_entry=[spiral])
            elapsed = time.perf_counter() - started
            assert elapsed < deadline_s, f"{name} took {elapsed:.1f} s on {completion[:60]!r}"
            low, high = reward.bounds()
            assert scores[0] is None or low <= scores[0] <= high
    assert not target.exists()
    print(f"\nhostile completions: {len(completions)} through {len(names)} rewards ({', '.join(names)})")


def test_the_hostile_code_does_what_it_tries_when_it_runs(tmp_path):
    """The control of the test above: each payload that writes, run as Python outside every reward, does write,
    so "nothing written" above is the rewards' doing, not payloads that could not work."""
    for index, code in enumerate(HOSTILE_CODE[:3]):
        target = tmp_path / f"written-{index}"
        subprocess.run([sys.executable, "-c", code.replace("{target}", str(target))], timeout=60, check=True)
        assert target.exists(), code
