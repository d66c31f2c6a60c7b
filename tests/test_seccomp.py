"""The seccomp filters (sandbox/seccomp.py) and Landlock (sandbox/landlock.py), each installed in a fresh Python
process that then tries what the worker may and may not do. The red-team suite attacks the same layers through a
worker; these pin each rule on its own."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llm_finetuning.sandbox import landlock, seccomp

pytestmark = pytest.mark.skipif(seccomp.unavailable() is not None, reason=f"{seccomp.unavailable()}")
HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")

TRIES = {
    "read a file": "len(open('/etc/hostname').read()) >= 0",
    "list a folder": "len(os.listdir(os.path.dirname(os.__file__))) > 0",
    "import a module not loaded yet": "bool(__import__('xml.dom.minidom'))",
    "open for writing": "bool(open(TARGET, 'w'))",
    "open for appending": "bool(open(TARGET, 'a'))",
    "create with os.open": "os.open(TARGET, os.O_CREAT | os.O_WRONLY) > 0",
    "remove": "os.remove(VICTIM) is None",
    "rename": "os.rename(VICTIM + '2', TARGET + '2') is None",
    "socket": "bool(__import__('socket').socket())",
    "thread": "__import__('threading').Thread(target=print).start() is None",
    "subprocess": "__import__('subprocess').run(['true']).returncode == 0",
    "fork": "os.waitpid(os.fork() or os._exit(0), 0)[1] == 0",
    "kill another process": "os.kill(os.getppid(), 0) is None",
    "read a limit": "__import__('resource').getrlimit(__import__('resource').RLIMIT_CPU) is not None",
    "lower a limit": "__import__('resource').setrlimit(__import__('resource').RLIMIT_CORE, (0, 0)) is None",
    "a syscall newer than the table": "__import__('ctypes').CDLL(None, use_errno=True).syscall(460) == -1"
                                      " and __import__('ctypes').get_errno() == 38",
}  # fmt: skip
WORKER_ALLOWS = {"read a file", "list a folder", "import a module not loaded yet", "fork", "kill another process",
                 "read a limit", "lower a limit", "a syscall newer than the table"}  # fmt: skip
CALL_ALLOWS = WORKER_ALLOWS - {"fork", "kill another process", "lower a limit"}


def tried(tmp_path: Path, filters: list[str]) -> dict[str, str]:
    """Install ``filters`` in a fresh process and run every try there: name -> 'ok' or the error."""
    (tmp_path / "victim").write_text("kept")
    (tmp_path / "victim2").write_text("kept")
    code = (
        "import json, os, sys\n"
        "from llm_finetuning.sandbox import seccomp\n"
        f"TARGET, VICTIM = {str(tmp_path / 'target')!r}, {str(tmp_path / 'victim')!r}\n"
        f"for name in {filters!r}:\n    seccomp.install(getattr(seccomp, name))\n"
        "status = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')]\n"
        "results = {'Seccomp': status[0]}\n"
        f"for name, code in {TRIES!r}.items():\n"
        "    try:\n        results[name] = 'ok' if eval(code) else 'false'\n"
        "    except Exception as exc:\n        results[name] = type(exc).__name__\n"
        "print(json.dumps(results))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(ran.stdout)


def test_the_worker_filter_refuses_writes_processes_threads_and_sockets_and_allows_reading(tmp_path):
    results = tried(tmp_path, ["WORKER"])
    assert results.pop("Seccomp") == "2"
    assert {name for name, result in results.items() if result == "ok"} == WORKER_ALLOWS, results
    assert (tmp_path / "victim").read_text() == "kept" and not (tmp_path / "target").exists()


def test_a_calls_filter_also_refuses_forks_signals_and_limits(tmp_path):
    results = tried(tmp_path, ["WORKER", "CALL"])
    assert results.pop("Seccomp") == "2"
    assert {name for name, result in results.items() if result == "ok"} == CALL_ALLOWS, results


def test_without_a_filter_every_try_works(tmp_path):
    """The positive control: the tries above are not refused by anything but the filters."""
    results = tried(tmp_path, [])
    assert results.pop("Seccomp") == "0"
    # (syscall 460 exists on kernels since 6.8: unfiltered, it fails on its bad arguments, not with ENOSYS)
    assert {name for name, result in results.items() if result != "ok"} <= {"a syscall newer than the table"}


@pytest.mark.skipif(not HEADER.exists() or platform.machine() != "x86_64", reason="reads the kernel's x86_64 header")
def test_the_syscall_table_is_the_kernels():
    """Every number the filter names is the kernel's for that name (syscalls the header numbers from
    ``FIRST_UNKNOWN`` on, which newer headers have, answer ENOSYS: the tries above check one)."""
    numbers = dict(re.findall(r"#define __NR_(\w+) (\d+)", HEADER.read_text()))
    assert numbers
    for name, number in seccomp.SYSCALLS.items():
        assert name not in numbers or int(numbers[name]) == number, name


@pytest.mark.skipif(landlock.unavailable() is not None, reason=f"{landlock.unavailable()}")
def test_landlock_leaves_files_readable_and_refuses_writes_proc_and_tcp(tmp_path):
    (tmp_path / "kept").write_text("kept")
    code = (
        "import json, os, socket\nfrom llm_finetuning.sandbox import landlock\n"
        f"parent, folder = os.getppid(), {str(tmp_path)!r}\nlandlock.restrict_to_reading()\n"
        "tries = {'read': lambda: open(folder + '/kept').read(), 'write': lambda: open(folder + '/new', 'w'),\n"
        "         'remove': lambda: os.remove(folder + '/kept'), 'proc': lambda: open('/proc/self/status').read(),\n"
        "         'parent environ': lambda: open('/proc/%d/environ' % parent).read(),\n"
        "         'tcp': lambda: socket.create_connection(('127.0.0.1', 9), 1), 'devnull': lambda: open('/dev/null').read()}\n"
        "out = {}\nfor name, attempt in tries.items():\n    try:\n        attempt()\n        out[name] = 'ok'\n"
        "    except Exception as exc:\n        out[name] = type(exc).__name__\nprint(json.dumps(out))\n"
    )  # fmt: skip
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    results = json.loads(ran.stdout)
    assert results == {"read": "ok", "write": "PermissionError", "remove": "PermissionError", "proc": "PermissionError",
                       "parent environ": "PermissionError", "tcp": "PermissionError", "devnull": "ok"}  # fmt: skip
    assert (tmp_path / "kept").read_text() == "kept"
