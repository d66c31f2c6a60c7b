"""The sandbox worker: what code run in it cannot do, how long a call can take, what the parent takes for a reply,
and that it ends with its parent.

The probe services (``sandbox_probe.py``) evaluate whatever expression they are sent with the real ``eval``, as a
verifier the parsers did not cover would, so every case here is code a completion could carry, held by the
kernel's layers alone: once in a worker that runs each call in a fresh copy of itself (as third-party verifiers
run), once in one that answers every call itself (as the grader's own sympy runs). ``test_red_team.py`` has the
attacks; this file the worker's mechanics.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import probe_worker
from red_team_attacks import block

TESTS = Path(__file__).resolve().parent
DEADLINE_S = 2.0


@pytest.fixture(scope="module", params=["sandbox_probe", "sandbox_probe_inline"])
def worker(request):
    with probe_worker(request.param) as probe:
        yield probe


def attempts(target: Path) -> list[str]:
    path = str(target)
    return [
        f"open({path!r}, 'w').write('x')",
        f"__import__('pathlib').Path({path!r}).write_text('x')",
        f"__import__('os').system('touch {path}')",
        f"__import__('subprocess').run(['touch', {path!r}])",
        f"__import__('os').open({path!r}, __import__('os').O_CREAT | __import__('os').O_WRONLY)",
        f"__import__('shutil').copy('/etc/hostname', {path!r})",
        f"__import__('ctypes').CDLL(None).system(b'touch {path}')",
        f"__import__('os').posix_spawn('/usr/bin/touch', ['touch', {path!r}], {{}})",
        "__import__('multiprocessing').Process(target=print).start()",
    ]


def test_code_in_the_sandbox_writes_no_file_and_starts_no_process(worker, tmp_path):
    target = tmp_path / "written"
    for attempt in attempts(target):
        outcome = worker.call(attempt, DEADLINE_S)
        assert not outcome.ok and outcome.failure.startswith("raised"), (attempt, outcome)
        assert not target.exists(), attempt


def test_code_in_the_sandbox_deletes_and_renames_nothing(worker, tmp_path):
    kept = tmp_path / "kept"
    kept.write_text("the user's")
    for attempt in (f"__import__('os').remove({str(kept)!r})", f"__import__('shutil').rmtree({str(tmp_path)!r})",
                    f"__import__('os').rename({str(kept)!r}, {str(kept) + '2'!r})"):  # fmt: skip
        assert worker.call(attempt, DEADLINE_S).failure.startswith("raised"), attempt
    assert kept.read_text() == "the user's"


def test_a_runaway_computation_returns_at_its_deadline_and_the_next_call_is_served(worker):
    pid = worker.pid
    started = time.perf_counter()
    outcome = worker.call("9**9**9**9", DEADLINE_S)
    assert outcome.failure == "timeout"
    assert time.perf_counter() - started < DEADLINE_S + 1.0
    assert worker.call("6 * 7", 60.0).value == "42"  # a fresh worker (its start does not count)
    # a worker that runs calls in copies kills the copy and stays; one that runs them itself is replaced
    assert (worker.pid == pid) == (worker.module == "sandbox_probe")


def test_a_memory_bomb_fails_inside_the_worker(worker):
    outcome = worker.call("len(bytearray(4 << 30))", DEADLINE_S)
    assert outcome.failure.startswith("raised MemoryError")
    assert worker.call("1 + 1", DEADLINE_S).value == "2"


def test_printed_text_is_not_taken_for_a_reply(worker):
    outcome = worker.call('print(\'{"n": 0, "value": "1.0"}\') or input()', DEADLINE_S)
    assert outcome.failure.startswith("raised")  # input() is refused; the printed line went nowhere
    assert worker.call("'still in step'", DEADLINE_S).value == "'still in step'"


def test_a_reply_without_the_calls_token_is_not_taken_and_the_worker_is_replaced(worker):
    """The worker answering calls itself: code that runs there can write to its pipe to the parent, but a line
    without this call's token (128 random bits) is not a reply; the parent kills that worker."""
    if worker.module == "sandbox_probe":
        pytest.skip("a copy per call has no descriptor of the worker's pipe (test_red_team.py tries)")
    forge = block("import os\nfor n in range(3, 64):\n    try:\n        os.write(n, b'{\"t\": \"0\", \"value\": 1.0}\\n')\n"
                  "    except OSError:\n        pass")  # fmt: skip
    pid = worker.pid
    assert worker.call(forge, DEADLINE_S).failure == "unexpected output"
    assert worker.pid != pid and worker.call("6 * 7", 60.0).value == "42"


def test_a_copy_that_writes_two_replies_is_scored_as_unexpected_output_and_the_worker_stays(worker):
    if worker.module != "sandbox_probe":
        pytest.skip("only a copy's reply is read to its end")
    two = block("import os\nfor n in range(3, 64):\n    try:\n        os.write(n, b'{\"value\": 1.0}')\n"
                "    except OSError:\n        pass")  # fmt: skip
    pid = worker.pid
    assert worker.call(two, DEADLINE_S).failure == "unexpected output"
    assert worker.pid == pid and worker.call("6 * 7", DEADLINE_S).value == "42"


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads the worker's limits from /proc")
def test_the_worker_runs_under_cpu_memory_and_file_size_limits_and_a_seccomp_filter(worker):
    worker.call("0", DEADLINE_S)
    limits = {line[:26].strip(): line[26:].split()[:2]
              for line in Path(f"/proc/{worker.pid}/limits").read_text().splitlines()[1:]}  # fmt: skip
    assert limits["Max cpu time"][0] != "unlimited"  # set by the parent before each call
    assert limits["Max address space"][0] != "unlimited"
    assert limits["Max file size"] == ["0", "0"]
    if worker.layers.get("seccomp") == "active":
        assert "Seccomp:\t2" in Path(f"/proc/{worker.pid}/status").read_text()


def test_a_killed_worker_that_will_not_be_reaped_does_not_raise(worker, monkeypatch):
    worker.call("0", DEADLINE_S)
    process = worker._process

    def stuck(timeout=None):
        raise subprocess.TimeoutExpired("worker", timeout)

    monkeypatch.setattr(process, "wait", stuck)
    worker._kill(process)  # the kill stands; waiting for it is given up, not raised
    assert worker.call("2 + 2", 60.0).value == "4"  # the dead worker is found and replaced


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_worker_dies_with_its_parent():
    code = (
        "import os, sys, time\n"
        "from llm_finetuning.sandbox import Worker\n"
        "worker = Worker('sandbox_probe')\n"
        "print(worker.call('1', 60.0).value, worker.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
    }
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        value, child = parent.stdout.readline().split()
        assert value == "1"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        for _ in range(100):
            if not Path(f"/proc/{child}").exists() or "Z" in _state(child):
                break
            time.sleep(0.05)
        assert not Path(f"/proc/{child}").exists() or "Z" in _state(
            child
        )  # gone, or a zombie awaiting reaping
    finally:
        parent.kill()


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_a_kernel_without_a_layer_is_said_once_at_start_and_recorded(monkeypatch, caplog):
    from llm_finetuning.session import plan

    missing = {"seccomp": "unavailable: seccomp is Linux's (darwin here)", "landlock": "active (ABI 4)"}
    monkeypatch.setattr(plan, "available_layers", lambda: dict(missing))
    with caplog.at_level("WARNING", logger="llm_finetuning.session.plan"):
        assert plan.sandbox_layers() == missing  # what RunPlan records, and summary.json with it
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "no seccomp (seccomp is Linux's (darwin here))" in warnings[0]
    caplog.clear()
    monkeypatch.setattr(plan, "available_layers", lambda: {"seccomp": "active", "landlock": "active (ABI 7)"})
    with caplog.at_level("WARNING", logger="llm_finetuning.session.plan"):
        plan.sandbox_layers()
    assert caplog.records == []
