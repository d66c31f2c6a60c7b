"""The red-team suite: answers that try to escape the verifier's worker, each contained (docs/guarantees.md).

Every attack in ``red_team_attacks.py`` (C functions without audit events, tampering with the confinement,
sockets, processes, files, another process's memory, forged replies, threads and timers, exhaustion) goes:

- through the **public reward path**: the ``reasoning_gym`` reward on a ``spiral_matrix`` problem (whose verifier
  ``eval``\\ s the answer) and on a ``countdown`` problem (whose verifier hands it to sympy's ``parse_expr``),
  and a user's reward that ``eval``\\ s its completions; the score must be no more than a plainly wrong answer gets (0;
  countdown's verifier gives any wrong answer 0.01);
- as **code that runs in a worker**: ``sandbox_probe``, which evaluates it with the real ``eval`` in a fresh copy
  of a worker, as a verifier the parsers did not cover would; so only the kernel's layers and the fresh copy
  hold it.

After each: no file changed in the attack's folder (or in shared memory), no process with the attack's marker,
no connection or datagram at the test's listeners, the victim process alive with its secret unread, and the
worker judges a right answer right. After all of them, a pause for threads and timers, and the same checks.

The **positive control** runs every attack that has an effect unconfined (``red_team_control.py``) and checks it
does what it tries: the suite cannot pass because an attack was broken. Run it with ``uv run --extra
reasoning-gym pytest -m redteam -s`` (about a minute); it prints how many attempts it made.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import secrets
import socket
import string
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
from conftest import probe_worker, reasoning_gym_marks
from red_team_attacks import ATTACKS

from llm_finetuning.rewards import get_reward
from llm_finetuning.rewards.plugin import PluginReward
from llm_finetuning.tasks.gym_safety import (
    ALLOWED,
    NEEDS_FIXED_HASH_SEED,
    PARSED_NOT_EVALUATED,
    REFUSED,
    REVIEWED_RELEASE,
)

pytestmark = [pytest.mark.redteam, *reasoning_gym_marks()]

TESTS = Path(__file__).resolve().parent
DEADLINE_S = 1.0
BIG = 1 << 30  # more than the probe's headroom (256 MiB); a machine's worth outside
SHM = Path("/dev/shm")


class Arena:
    """The attacks' surroundings: a folder per attack, listeners, a victim process holding a secret."""

    def __init__(self, root: Path) -> None:
        self.marker = f"rt{secrets.token_hex(4)}"
        self.root = root / self.marker
        self.secret = f"red-team-secret-{secrets.token_hex(8)}"
        self.tcp = self._listener(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
        self.udp = self._listener(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
        self.unix_path = str(root / "listener.sock")
        self.unix = self._listener(socket.AF_UNIX, socket.SOCK_STREAM, self.unix_path)
        self.abstract = self._listener(socket.AF_UNIX, socket.SOCK_STREAM, f"\0{self.marker}")
        self.victim: subprocess.Popen | None = None
        self.prey: subprocess.Popen | None = None
        self.reset()

    @staticmethod
    def _listener(family: int, kind: int, address: object) -> socket.socket:
        listener = socket.socket(family, kind)
        listener.bind(address)
        if kind == socket.SOCK_STREAM:
            listener.listen(64)
        listener.setblocking(False)
        return listener

    def reset(self) -> None:
        """Fresh folders, shared memory and victim; listeners drained; stray processes gone."""
        self.kill_marked()
        subprocess.run(["rm", "-rf", str(self.root)], check=True)
        for index in range(len(ATTACKS)):
            folder = self.root / f"a{index}"
            (folder / "tree").mkdir(parents=True)
            (folder / "victim").write_text("the user's\n")
            (folder / "tree" / "leaf").write_text("kept\n")
        for made in SHM.glob(f"{self.marker}*"):
            made.unlink()
        (SHM / f"{self.marker}-kept").write_text("kept\n")
        if self.victim is None or self.victim.poll() is not None:
            code = ("import ctypes, os, sys, time\nsecret = ctypes.create_string_buffer(os.environ['RED_TEAM_SECRET']"
                    ".encode())\nprint(ctypes.addressof(secret), flush=True)\ntime.sleep(3600)\n")  # fmt: skip
            self.victim = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                           env={**os.environ, "RED_TEAM_SECRET": self.secret})  # fmt: skip
            self.victim_addr = int(self.victim.stdout.readline())
        if self.prey is None or self.prey.poll() is not None:
            self.prey = subprocess.Popen(["sleep", "3600"])
        self.heard()
        self.baseline = self.snapshot()

    def values(self, index: int) -> dict[str, object]:
        folder = self.root / f"a{index}"
        return {"victim": folder / "victim", "target": folder / "target", "tree": folder / "tree", "dir": folder,
                "port": self.tcp.getsockname()[1], "udp": self.udp.getsockname()[1], "unix": self.unix_path,
                "abstract": self.marker, "marker": self.marker, "victim_pid": self.victim.pid,
                "victim_addr": self.victim_addr, "prey_pid": self.prey.pid, "big": BIG}  # fmt: skip

    def code(self, index: int) -> str:
        return string.Template(ATTACKS[index].code).substitute(self.values(index))

    def snapshot(self) -> dict[str, tuple]:
        """Every file and folder under the attack folders and the marker's shared memory, as they are."""
        seen = {}
        for path in [*sorted(self.root.rglob("*")), *sorted(SHM.glob(f"{self.marker}*"))]:
            info = path.lstat()
            content = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else ""
            seen[str(path)] = (info.st_mode, info.st_size, info.st_mtime_ns, content)
        return seen

    def heard(self) -> Counter:
        """Connections and datagrams each listener received since last asked (drained)."""
        count: Counter = Counter()
        for name, listener in (("port", self.tcp), ("unix", self.unix), ("abstract", self.abstract)):
            while True:
                try:
                    listener.accept()[0].close()
                    count[name] += 1
                except BlockingIOError:
                    break
        while True:
            try:
                self.udp.recvfrom(1 << 16)
                count["udp"] += 1
            except BlockingIOError:
                break
        return count

    def marked_processes(self) -> list[int]:
        return [p.pid for p in psutil.process_iter(["cmdline"]) if self.marker in " ".join(p.info["cmdline"] or ())]

    def kill_marked(self) -> None:
        for pid in self.marked_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)

    def effects(self) -> list[str]:
        """What the attacks did to the world outside the worker: empty when contained."""
        found = []
        now = self.snapshot()
        changed = sorted(set(now) ^ set(self.baseline) | {p for p in now if p in self.baseline and now[p] != self.baseline[p]})
        if changed:
            found.append(f"files changed: {changed[:4]}")
        if processes := self.marked_processes():
            found.append(f"processes spawned: {processes}")
        if heard := self.heard():
            found.append(f"connections or datagrams received: {dict(heard)}")
        if self.victim.poll() is not None or self.prey.poll() is not None:
            found.append("the victim or the prey process was killed")
        return found

    def close(self) -> None:
        self.kill_marked()
        for process in (self.victim, self.prey):
            if process is not None:
                process.kill()
        for listener in (self.tcp, self.udp, self.unix, self.abstract):
            listener.close()
        for made in SHM.glob(f"{self.marker}*"):
            made.unlink()


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    world = Arena(tmp_path_factory.mktemp("red_team"))
    yield world
    world.close()


@pytest.fixture(scope="module")
def probe():
    with probe_worker("sandbox_probe") as worker:
        yield worker


@pytest.fixture(scope="module")
def public_paths(tmp_path_factory):
    """The reward path's deliveries: name -> (score one answer, a right answer, a wrong answer's score)."""
    from llm_finetuning.tasks.gym import entry_ref, task_dataset

    folder = tmp_path_factory.mktemp("user_reward")
    (folder / "evaluates.py").write_text(
        "def evaluates(completions, **kwargs):\n"
        "    scores = []\n"
        "    for completion in completions:\n"
        "        try:\n"
        "            scores.append(1.0 if eval(completion) == 42 else 0.0)  # a user's reward that evals its input\n"
        "        except Exception:\n"
        "            scores.append(0.0)\n"
        "    return scores\n"
    )
    gym = get_reward("reasoning_gym", timeout=DEADLINE_S)
    user = PluginReward(f"{folder / 'evaluates.py'}:evaluates", timeout=DEADLINE_S)
    spiral = entry_ref("spiral_matrix", {}, seed=1, size=1, index=0)
    countdown = entry_ref("countdown", {}, seed=1, size=1, index=0)
    right_spiral = task_dataset("spiral_matrix", {}, seed=1, size=1)[0]["answer"]
    right_countdown = task_dataset("countdown", {}, seed=1, size=1)[0]["metadata"]["expression"]

    def through_gym(ref):
        return lambda answer: gym(completions=[f"<SOLUTION>{answer}</SOLUTION>"], reasoning_gym_entry=[ref])[0]

    def through_user(answer):
        return user(completions=[answer])[0]

    paths = {"reasoning_gym spiral_matrix (eval)": (through_gym(spiral), right_spiral),
             "reasoning_gym countdown (parse_expr)": (through_gym(countdown), right_countdown),
             "a user's reward that evals": (through_user, "6 * 7")}  # fmt: skip
    for score, right in paths.values():
        assert score(right) == 1.0  # the paths judge, before any attack
    return {name: (score, right, score("not an answer")) for name, (score, right) in paths.items()}


def test_the_suite_has_thirty_attempts_or_more_in_every_class():
    kinds = Counter(attack.kind for attack in ATTACKS)
    assert len(ATTACKS) >= 30, len(ATTACKS)
    assert set(kinds) == {"no audit event", "tampering", "sockets", "processes", "files", "memory", "forging",
                          "outliving the call", "exhaustion"}  # fmt: skip
    controlled = {attack.kind for attack in ATTACKS if attack.control and attack.effect != "none"}
    assert controlled == set(kinds), set(kinds) - controlled  # a positive control in every class
    print(f"\nred team: {len(ATTACKS)} attacks in {len(kinds)} classes: {dict(kinds)}")


def test_every_attack_does_what_it_tries_outside_the_sandbox(arena, tmp_path):
    """The positive control: unconfined, with the real eval, each attack that has an effect shows it."""
    chosen = [i for i, attack in enumerate(ATTACKS) if attack.control and attack.effect != "none"]
    plan = [[arena.code(i), 3.0 if ATTACKS[i].effect == "exhaust" else 10.0] for i in chosen]
    try:
        subprocess.run([sys.executable, str(TESTS / "red_team_control.py"), str(tmp_path / "results.json")],
                       input=json.dumps(plan), capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
        results = json.loads((tmp_path / "results.json").read_text())
        heard = arena.heard()
        missing = [f"{ATTACKS[i].kind}: {ATTACKS[i].name} -> {result['output'][:120]!r}"
                   for i, result in zip(chosen, results) if not _did_it(arena, i, result, heard)]  # fmt: skip
    finally:
        arena.reset()
    assert not missing, "attacks that did nothing even unconfined:\n" + "\n".join(missing)
    print(f"\nred team: positive control, {len(chosen)} attacks do what they try when unconfined")


def _did_it(arena: Arena, index: int, result: dict, heard: Counter) -> bool:
    folder, effect, output = arena.root / f"a{index}", ATTACKS[index].effect, result["output"]
    if effect == "file" or effect == "later":
        before = {p: v for p, v in arena.baseline.items() if p.startswith(f"{folder}/") or p == str(folder)}
        now = {p: v for p, v in arena.snapshot().items() if p.startswith(f"{folder}/") or p == str(folder)}
        shm_changed = "shm" in ATTACKS[index].name
        return before != now or shm_changed and not (SHM / f"{arena.marker}-kept").exists() or (
            SHM / f"{arena.marker}-made").exists()
    if effect == "process":
        return arena.prey.poll() is not None
    if effect == "connection":  # each listener heard one connection from every attack aimed at it
        listener = next(name for name in ("port", "udp", "unix", "abstract") if f"${name}" in ATTACKS[index].code)
        aimed = sum(f"${listener}" in a.code for a in ATTACKS if a.control and a.effect == "connection")
        return heard[listener] == aimed
    if effect == "leak":
        return output.startswith("value") or arena.secret in output
    if effect == "forge":
        return '"value": 1.0' in output
    if effect == "exhaust":
        return result["timed_out"] or output.startswith("value")
    raise AssertionError(f"no control for effect {effect}")


def test_every_attack_scores_zero_through_the_public_reward_path(arena, public_paths):
    from llm_finetuning.tasks.gym import _VERDICTS as verdicts

    attempts = 0
    for index, attack in enumerate(ATTACKS):
        code = arena.code(index)
        for path, (score, right, wrong) in public_paths.items():
            assert wrong <= 0.01 and score(code) <= wrong, f"{attack.kind}: {attack.name} through {path}"
            attempts += 1
            assert arena.effects() == [], f"{attack.kind}: {attack.name} through {path}"
            verdicts.clear()  # the worker judges again, not the verdicts kept from before the attack
            assert score(right) == 1.0, f"{path} after {attack.name}"
    time.sleep(1.5)  # threads and timers, had any started, act now
    assert arena.effects() == []
    print(f"\nred team: {attempts} attempts through {len(public_paths)} reward paths, every one scored as wrong, "
          "nothing outside changed")  # fmt: skip


def test_every_attack_is_contained_when_its_code_runs_in_a_worker(arena, probe):
    assert probe.layers == {"seccomp": "active", "landlock": probe.layers["landlock"]}
    attempts = 0
    for index, attack in enumerate(ATTACKS):
        started = time.perf_counter()
        outcome = probe.call(arena.code(index), DEADLINE_S)
        took = time.perf_counter() - started
        attempts += 1
        where = f"{attack.kind}: {attack.name} -> {outcome}"
        assert arena.effects() == [], where
        text = f"{outcome.value}{outcome.failure}"
        assert arena.secret not in text, where
        if attack.effect == "leak":
            assert not outcome.ok, where  # every read of another process was refused
        if attack.effect == "forge":
            assert outcome.value != 1.0, where  # no forged reply was taken for the call's
        if attack.effect == "exhaust":
            assert not outcome.ok and took < DEADLINE_S + 2.5, where
        assert probe.call("6 * 7", DEADLINE_S).value == "42", f"the worker after {attack.name}"
    time.sleep(1.5)
    assert arena.effects() == []
    print(f"\nred team: {attempts} attempts ran as code inside a worker, every one contained by the kernel's "
          "layers and a fresh process per call")  # fmt: skip


def test_code_that_runs_inside_a_call_decides_at_most_that_calls_reply(probe):
    """The one thing code that runs can do (docs/guarantees.md): write its own call's reply. It cannot reach the
    worker's pipe to the trainer, another call, or anything after its call."""
    forged = "exec(\"import os\\nfor n in range(64):\\n  try: os.write(n, b'{\\\"value\\\": 1.0}')\\n  except OSError: pass\\nos._exit(0)\")"
    assert probe.call(forged, DEADLINE_S).value == 1.0  # its own call: the copy's reply is what it wrote
    assert probe.call("'a later call'", DEADLINE_S).value == "'a later call'"  # nothing of it is left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_every_verifier_and_reward_worker_runs_under_a_seccomp_filter(tmp_path):
    from llm_finetuning.grading import math_verify, symbolic
    from llm_finetuning.rewards import plugin
    from llm_finetuning.tasks import gym

    (tmp_path / "mine.py").write_text("def one(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    PluginReward(f"{tmp_path / 'mine.py'}:one")(completions=["x"])
    gym.verify(gym.entry_ref("chain_sum", {}, seed=1, size=1, index=0), "1", 5.0)
    symbolic.start(wait=True)
    workers = {"reasoning-gym's verifier": gym._VERIFIER, "a user's reward": plugin._WORKER,
               "the grader's sympy": symbolic._WORKER}  # fmt: skip
    if math_verify.problem() is None:  # the grader: math_verify option, where the package is installed
        assert math_verify.is_equivalent("1/2", "0.5")
        workers["math-verify"] = math_verify._WORKER
    for name, worker in workers.items():
        status = Path(f"/proc/{worker.pid}/status").read_text()
        assert "Seccomp:\t2" in status, name  # mode 2: a filter
        assert worker.layers["seccomp"] == "active" and worker.layers["landlock"].startswith("active"), name


def test_no_reviewed_verifier_hands_model_text_to_python():
    """Every allowed task's verifier on hostile answers (``verifier_audit.py``): with the parsers a call runs under,
    no code is made from what the model wrote; without them (the positive control) exactly the tasks the allow-list
    names as parsing show up."""
    found = {}
    for mode in ("plain", "parsers"):
        ran = subprocess.run([sys.executable, str(TESTS / "verifier_audit.py"), mode], capture_output=True, text=True,
                             timeout=600, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})  # fmt: skip
        found[mode] = json.loads(ran.stdout.strip().splitlines()[-1])
    assert set(found["plain"]["found"]) == set(PARSED_NOT_EVALUATED)
    assert found["parsers"]["found"] == {}
    print(f"\nred team: {found['parsers']['scored']} hostile answers through the verifiers of {len(ALLOWED)} tasks, "
          "none reached eval, exec, compile or parse_expr")  # fmt: skip


def test_the_allow_list_is_the_installed_release_reviewed_task_by_task():
    from reasoning_gym.factory import DATASETS

    assert importlib.metadata.version("reasoning-gym") == REVIEWED_RELEASE  # a new release needs a new review
    assert set(DATASETS) == ALLOWED | set(REFUSED)
    assert set(PARSED_NOT_EVALUATED) <= ALLOWED and NEEDS_FIXED_HASH_SEED <= ALLOWED


def test_every_task_whose_problems_follow_the_hash_seed_needs_a_fixed_one(tmp_path):
    code = ("import json, sys, warnings\nwarnings.simplefilter('ignore')\n"
            "from llm_finetuning.tasks import gym\nfrom llm_finetuning.tasks.gym_safety import ALLOWED\n"
            "print('\\n' + json.dumps({t: [repr((e['question'], e['answer'])) for e in (gym.task_dataset(t, {}, seed=5, size=6)[i]"
            " for i in range(6))] for t in sorted(ALLOWED)}))")  # fmt: skip
    made = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                                      check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout.splitlines()[-1])
            for seed in ("1", "2")]  # fmt: skip
    following = {task for task in made[0] if made[0][task] != made[1][task]}
    assert following and following <= NEEDS_FIXED_HASH_SEED, following - NEEDS_FIXED_HASH_SEED
