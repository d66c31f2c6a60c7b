"""Landlock: the file system read-only, ``/proc`` and ``/sys`` unreadable, no TCP, no signal out, for good.

Landlock (Linux 5.13+) lets an unprivileged process restrict itself and everything it forks; root is bound
too. A worker keeps the right to read files and list folders everywhere except ``/proc``, ``/sys`` and
``/dev`` (where only ``null``, ``zero``, ``random`` and ``urandom`` stay readable), so no other process's
memory, environment or file descriptors can be read through ``/proc/<pid>``. Every right that writes is
withheld everywhere (write, truncate, create, remove, rename, link, device ioctls), and from ABI 2, 3, 4, 5, 6 on
the kernel also handles re-parenting, truncation, TCP bind/connect, device ioctls, and abstract Unix sockets and
signals to processes outside the sandbox. Landlock also refuses ptrace (and so ``/proc/<pid>/mem`` and the
descriptor links in ``/proc/<pid>/fd``) on any process outside the sandbox's domain; a copy of a worker that runs
one call takes a domain of its own (``new_layer``), so the worker it was forked from is outside it too. The seccomp filter (``seccomp.py``) refuses most of this too: each layer stands
without the other.

    >>> isinstance(abi(), int)
    True
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["abi", "new_layer", "restrict_to_reading", "unavailable"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_READ_FILE, _READ_DIR, _MAKE_BLOCK = 1 << 2, 1 << 3, 1 << 11
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect
_SCOPES = (1 << 0) | (1 << 1)  # abstract Unix sockets, signals
_UNREADABLE = ("proc", "sys", "dev")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class _Ruleset(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The Landlock ABI version the kernel offers; 0 when it offers none."""
    if _LIBC is None:
        return 0
    version = _LIBC.syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(0, int(version))


def unavailable() -> str | None:
    """Why this process cannot use Landlock (None when it can)."""
    if _LIBC is None:
        return f"Landlock is Linux's ({sys.platform} here)"
    if abi() < 1:
        return f"the kernel offers no Landlock (Linux 5.13+ with it enabled; {os.strerror(ctypes.get_errno())})"
    return None


def restrict_to_reading(root: str = "/") -> int:
    """Restrict this process (and what it forks) as the module docstring says; returns the ABI used."""
    version = abi()
    if version < 1:
        raise OSError(unavailable())
    fs_rights = _FS_RIGHTS_BY_ABI.get(version, (1 << 16) - 1)
    attr = _Ruleset(fs_rights, _NET_TCP if version >= 4 else 0, _SCOPES if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = _check(_LIBC.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), 0))
    try:
        for path in _readable(root):
            _allow_reading(ruleset, path)
        _check(_LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        _check(_LIBC.syscall(ctypes.c_long(_RESTRICT_SELF), ruleset, 0))
    finally:
        os.close(ruleset)
    return version


def new_layer() -> None:
    """Put this process in a Landlock domain of its own, nested in the one it has (which it keeps): processes of
    the outer domain, the worker it was forked from included, are then outside its reach (ptrace, their
    ``/proc/<pid>/fd`` links, signals). The layer adds no rule of its own beyond what the outer one refused."""
    version = abi()
    attr = _Ruleset(_MAKE_BLOCK, 0, _SCOPES if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = _check(_LIBC.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), 0))
    try:
        _check(_LIBC.syscall(ctypes.c_long(_RESTRICT_SELF), ruleset, 0))
    finally:
        os.close(ruleset)


def _readable(root: str) -> list[str]:
    """What stays readable: every entry of ``root`` but /proc, /sys and /dev; four devices."""
    entries = [os.path.join(root, name) for name in sorted(os.listdir(root)) if name not in _UNREADABLE]
    return entries + [device for device in _DEVICES if os.path.exists(device)]


def _allow_reading(ruleset: int, path: str) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # a dangling link or an entry that vanished: nothing to read there
        return
    try:
        rights = _READ_FILE | (_READ_DIR if os.path.isdir(path) else 0)
        rule = _PathBeneath(rights, fd)
        _check(_LIBC.syscall(ctypes.c_long(_ADD_RULE), ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0))
    finally:
        os.close(fd)


def _check(result: int) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"Landlock refused: {os.strerror(number)}")
    return result
