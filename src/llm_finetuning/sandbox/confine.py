"""The confinement a worker puts on itself once its imports are done, and the stricter one each call runs under.

Layers, outermost first (docs/guarantees.md says what each stops and what it cannot):

1. **Model text is parsed, never evaluated** (``parsers.py``): in a call, ``eval`` reads literals only, ``exec``
   refuses, sympy's ``parse_expr`` builds math without ``eval``.
2. **The kernel** refuses what the worker may not do, whatever code asks: a seccomp-bpf filter (``seccomp.py``:
   no program, process, thread, socket, file write, ptrace, signal out, raised limit) and Landlock
   (``landlock.py``: the file system read-only, ``/proc`` unreadable, no TCP). Both are for good: nothing in the
   process can lift them.
3. **Resource limits**: the address space may grow by ``headroom`` bytes past the imports (``RLIMIT_AS``), no file
   may grow (``RLIMIT_FSIZE`` 0), no core file, and a call's CPU time is bounded (``RLIMIT_CPU``).
4. **A fresh copy per call** (``serve.py``): a worker whose service runs third-party code on model text forks a
   copy of itself for each such call, which installs the call's filter, runs the call, writes one reply and is
   killed; nothing it did (threads, timers, patched modules, open files) reaches the next call.
5. A Python **audit hook** refuses writes, processes, sockets and ``ctypes`` at the interpreter's level: a first
   layer that gives readable errors, not one anything depends on (code that runs can rebind its tables).

And the worker dies with its parent (``PR_SET_PDEATHSIG``), so a SIGKILLed trainer leaves nothing computing.
Where the kernel offers no seccomp or Landlock (another OS, an old kernel, another architecture), ``lock_down``
reports it (the pipeline says so once at start-up and in ``summary.json``) and the other layers stand.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import sys

try:
    import resource
except ImportError:  # not on this platform (Windows): the parent's deadline still holds
    resource = None

from . import landlock, parsers, seccomp

__all__ = ["CallConfinement", "available_layers", "die_with_parent", "lock_down"]

_PR_SET_PDEATHSIG = 1
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Audit events refused by the hook: exact names, and prefixes ending in ".".
_REFUSED = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg",
    "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.chflags", "os.lchflags",
    "os.truncate", "os.link", "os.symlink", "os.utime", "os.putenv", "os.unsetenv", "os.setxattr",
    "os.removexattr", "os.chdir", "os.add_dll_directory", "os.startfile", "signal.pthread_kill",
    "subprocess.Popen", "builtins.input", "resource.setrlimit", "resource.prlimit", "sys.addaudithook",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
    "sys.setprofile", "mmap.__new__", "pty.spawn", "webbrowser.open",
})  # fmt: skip
_REFUSED_PREFIXES = ("socket.", "ctypes.", "shutil.", "urllib.", "http.", "ftplib.", "smtplib.", "poplib.",
                     "imaplib.", "nntplib.", "telnetlib.", "sqlite3.", "_winapi.", "winreg.", "msvcrt.")  # fmt: skip
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PRCTL = _LIBC.prctl if _LIBC is not None else None  # resolved here: a call's copy should not pay the lookup


class Refused(PermissionError):
    """What a confined worker may not do (the audit hook's refusal)."""


def available_layers() -> dict[str, str]:
    """What the kernel here offers a worker: ``{"seccomp": "active" | "unavailable: <why>", "landlock": …}``,
    as a worker reports it once confined (the same kernel: the parent can ask without starting one)."""
    problem = seccomp.unavailable()
    layers = {"seccomp": f"unavailable: {problem}" if problem else "active"}
    problem = landlock.unavailable()
    layers["landlock"] = f"unavailable: {problem}" if problem else f"active (ABI {landlock.abi()})"
    return layers


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux); exit now if it already has."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def lock_down(headroom_bytes: int, forks: bool) -> dict[str, str]:
    """The worker's confinement, for good: limits, Landlock, the worker filter. A worker that serves calls itself
    (``forks`` False) takes the call's confinement too. Returns the layers in force. Call after the imports
    and the warm-up: they read files and grow the address space."""
    _limit_resources(headroom_bytes)
    layers = available_layers()
    installs = {"landlock": landlock.restrict_to_reading, "seccomp": lambda: seccomp.install(seccomp.WORKER)}
    for name, install in installs.items():  # Landlock first: the worker filter then refuses its calls
        if layers[name].startswith("active"):
            try:
                install()
            except OSError as exc:  # a kernel (or a container's policy) that offers it but refuses it here
                layers[name] = f"unavailable: could not install ({exc})"
    if not forks:
        CallConfinement(parsers.replacements(), layers).enter()
    return layers


class CallConfinement:
    """What a call runs under, prepared by the worker before it forks so that the copy only has to enter it:
    the call's seccomp filter, the parsers and where sympy's ``parse_expr`` is to be replaced."""

    def __init__(self, parser_replacements: list, layers: dict[str, str]) -> None:
        """``layers``: what the worker installed (``lock_down``); a call adds to those only."""
        self.parser_replacements = parser_replacements
        self.filter = seccomp.Prepared(seccomp.CALL) if layers["seccomp"] == "active" else None
        self.landlock = layers["landlock"].startswith("active")

    def enter(self, timeout_s: float | None = None, keep_fd: int | None = None, parent_pid: int | None = None) -> None:
        """Confine this process for one call: only ``keep_fd`` open past stderr, death with ``parent_pid``, at
        most ``timeout_s`` of CPU time, the call's filter, the parsers, the audit hook."""
        if keep_fd is not None:
            os.closerange(3, keep_fd)
            os.closerange(keep_fd + 1, os.sysconf("SC_OPEN_MAX"))
        if parent_pid is not None:
            die_with_parent(parent_pid)
        if timeout_s is not None:
            _limit_cpu(timeout_s)
        if self.landlock and parent_pid is not None:
            landlock.new_layer()  # the worker it was forked from (its pipes to the trainer) out of reach
        if self.filter is not None:
            self.filter.install()  # before the audit hook: installing it is a ctypes call the hook refuses
        parsers.install(self.parser_replacements)
        sys.addaudithook(_refuse)


def _limit_resources(headroom_bytes: int) -> None:
    if resource is None:
        return
    used = _address_space_bytes()
    if used is not None:
        resource.setrlimit(resource.RLIMIT_AS, (used + headroom_bytes, used + headroom_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write that would grow a file fails (EFBIG) instead


def _limit_cpu(seconds: float) -> None:
    """At most ``seconds`` of CPU time (rounded up, plus one: the limit counts whole seconds) for this process,
    which has just been forked (its count starts at zero); past it the kernel kills it."""
    if resource is None:
        return
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    limit = math.ceil(seconds) + 1
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))


def _address_space_bytes() -> int | None:
    """This process's virtual memory size (``VmSize``), or None where /proc cannot tell."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _refuse(event: str, args: tuple) -> None:
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writes:
            raise Refused(f"the sandbox refuses to open {path!r} for writing")
        return
    if event in _REFUSED or event.startswith(_REFUSED_PREFIXES):
        raise Refused(f"the sandbox refuses {event}")
