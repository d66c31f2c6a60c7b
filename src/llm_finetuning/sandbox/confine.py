"""The limits a worker child puts on itself once its imports are done, before it says it is ready.

- **Memory**: the address space may grow by ``headroom`` bytes past what the imports took
  (``RLIMIT_AS``), so ``10**(10**10)`` fails with ``MemoryError`` instead of taking the machine's memory.
- **Files**: no file may grow (``RLIMIT_FSIZE`` 0, no core files), and an audit hook refuses every
  opening for writing, deleting, renaming or creating of files and folders.
- **Processes, network, foreign code**: the audit hook refuses ``os.system``, ``subprocess``, ``exec``,
  ``fork``, ``spawn``, signals to other processes, sockets and ``ctypes``; and it refuses ``setrlimit``,
  so the limits stay.
- **CPU time**: the parent sets ``RLIMIT_CPU`` before each call (``worker.py``): the child cannot.
- **Its parent's death**: the kernel kills the child when the parent dies (``PR_SET_PDEATHSIG``), so a
  SIGKILLed trainer leaves no verifier computing.

What this is not: an operating-system container. Python's audit hooks stop what Python code asks the
interpreter to do; C code of an extension module could still act on its own. The worker runs with the
user's rights, in the root folder as its working directory.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["die_with_parent", "lock_down"]

_PR_SET_PDEATHSIG = 1
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Audit events refused after lock-down: exact names, and prefixes ending in ".".
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


class Refused(PermissionError):
    """What a confined worker may not do."""


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux); exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def lock_down(headroom_bytes: int) -> None:
    """The limits above, from now on. Call after the imports and the warm-up: they read files and grow the
    address space."""
    try:
        import resource
    except ImportError:  # not on this platform (Windows): the parent's deadline and the audit hook still hold
        resource = None
    if resource is not None:
        used = _address_space_bytes()
        if used is not None:
            resource.setrlimit(resource.RLIMIT_AS, (used + headroom_bytes, used + headroom_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write that would grow a file fails (EFBIG) instead
    sys.addaudithook(_refuse)


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
