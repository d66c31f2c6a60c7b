"""A seccomp-bpf filter of our own: the system calls a worker may not make, refused by the kernel.

Why our own and not libseccomp's bindings: the bindings are not a maintained wheel on PyPI (they need the C
library and its headers at install time), and what we need is small and fixed: a deny list checked against one
architecture's syscall numbers, a few argument checks (open flags, clone flags, a new resource limit, two tty
ioctls). The program is built here, instruction by instruction, and every rule is exercised by the red-team
suite (``tests/test_red_team.py``) and ``tests/test_seccomp.py``.

Two filters, stacked (the kernel applies every filter a process has; the strictest answer wins):

- ``WORKER`` (a worker, after its imports): no program runs (``execve``, ``execveat``), no thread or
  namespace is made (``clone`` only in the shape of ``fork``; ``clone3``, whose flags a filter cannot read,
  answers ENOSYS so the C library falls back to ``clone``), no socket, no file opened for writing, created,
  deleted, renamed, linked, truncated or re-permissioned, no mount, no ptrace or reading another process's
  memory, no new user or namespace, no kernel module, BPF, perf or keyring call, no injected terminal input
  (``TIOCSTI``); system calls newer than this table answer ENOSYS.
- ``CALL`` (the copy of a worker that runs one call, and a worker that serves calls itself): also no
  ``fork``/``vfork``/``clone`` at all (so no thread and no child), no signal to another process, no raised
  limit (``setrlimit``; ``prlimit64`` with a new limit), no ``prctl``, no further ``seccomp`` or Landlock.

A refused call fails with EPERM (ENOSYS where noted); a call from another architecture's ABI (``int 0x80``)
kills the process. x86_64 only (the architecture the lock resolves): elsewhere ``unavailable()`` says why and the
worker runs without the filter (``confine.py`` reports it).

    >>> len(WORKER) > 100 and len(CALL) > 20 and all(len(f) % 8 == 0 for f in (WORKER, CALL))
    True
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

__all__ = ["CALL", "SYSCALLS", "WORKER", "install", "unavailable"]

AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
FIRST_UNKNOWN = 451  # syscalls from here on are newer than this table: ENOSYS
SYSCALLS = {
    "open": 2, "ioctl": 16, "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62, "truncate": 76, "ftruncate": 77,
    "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85, "link": 86, "unlink": 87, "symlink": 88, "chmod": 90,
    "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "ptrace": 101, "syslog": 103, "setuid": 105,
    "setgid": 106, "setreuid": 113, "setregid": 114, "setgroups": 116, "setresuid": 117, "setresgid": 119,
    "setfsuid": 122, "setfsgid": 123, "capset": 126, "rt_sigqueueinfo": 129, "utime": 132, "mknod": 133,
    "uselib": 134, "personality": 135, "setpriority": 141, "vhangup": 153, "pivot_root": 155, "prctl": 157,
    "adjtimex": 159, "setrlimit": 160, "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165,
    "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179, "setxattr": 188,
    "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
    "tkill": 200, "clock_settime": 227, "tgkill": 234, "utimes": 235, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "ioprio_set": 251, "migrate_pages": 256, "openat": 257, "mkdirat": 258,
    "mknodat": 259, "fchownat": 260, "futimesat": 261, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "fchmodat": 268, "unshare": 272, "move_pages": 279, "utimensat": 280, "fallocate": 285,
    "accept4": 288, "rt_tgsigqueueinfo": 297, "perf_event_open": 298, "fanotify_init": 300, "prlimit64": 302,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "renameat2": 316,
    "seccomp": 317, "memfd_create": 319, "kexec_file_load": 320, "bpf": 321, "execveat": 322,
    "userfaultfd": 323, "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "pidfd_open": 434, "clone3": 435, "openat2": 437, "pidfd_getfd": 438,
    "process_madvise": 440, "mount_setattr": 442, "quotactl_fd": 443, "landlock_create_ruleset": 444,
    "landlock_add_rule": 445, "landlock_restrict_self": 446, "memfd_secret": 447, "process_mrelease": 448,
}  # fmt: skip  (x86_64 numbers, from the kernel's asm/unistd_64.h; tests/test_seccomp.py checks them there)

# (O_TMPFILE needs O_WRONLY or O_RDWR, and its own bits include O_DIRECTORY, which reading a folder uses)
_WRITE_OPEN = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_FORK_FLAGS = 0x00200000 | 0x01000000 | 0xFF  # CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID | the exit signal
_TTY_INJECTION = (0x5412, 0x541C)  # TIOCSTI (push input into a terminal), TIOCLINUX
_DENIED_BY_WORKER = (
    "execve", "execveat", "vfork", "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "creat", "open_by_handle_at", "name_to_handle_at", "unlink", "unlinkat", "rmdir", "rename", "renameat",
    "renameat2", "mkdir", "mkdirat", "mknod", "mknodat", "link", "linkat", "symlink", "symlinkat", "truncate",
    "ftruncate", "fallocate", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime",
    "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff", "acct", "memfd_create",
    "memfd_secret", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "quotactl", "quotactl_fd",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    "process_mrelease", "migrate_pages", "move_pages", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid", "setfsuid", "setfsgid", "setgroups", "capset", "unshare", "setns", "personality", "bpf",
    "perf_event_open", "fanotify_init", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "iopl", "ioperm", "add_key", "request_key", "keyctl", "syslog", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "sethostname", "setdomainname", "vhangup", "uselib",
    "ioprio_set", "setpriority",
)  # fmt: skip
_DENIED_BY_CALL = ("clone", "fork", "vfork", "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
                   "pidfd_open", "pidfd_send_signal", "setrlimit", "prctl", "seccomp", "landlock_create_ruleset",
                   "landlock_add_rule", "landlock_restrict_self")  # fmt: skip

# classic BPF, as seccomp runs it: each instruction is (code, jump if true, jump if false, operand)
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_NR, _ARCH = 0, 4


def _arg(index: int, high: bool = False) -> int:
    """Offset of a syscall argument's low (or high) 32 bits in ``struct seccomp_data`` (little-endian)."""
    return 16 + 8 * index + (4 if high else 0)


class _Program:
    """A filter's instructions; each rule leaves the syscall number in the accumulator for the next."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int, int, int]] = [
            (_LD, 0, 0, _ARCH), (_JEQ, 1, 0, AUDIT_ARCH_X86_64), (_RET, 0, 0, _KILL_PROCESS),
            (_LD, 0, 0, _NR), (_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, _ERRNO | errno.EPERM),
            (_JGE, 0, 1, FIRST_UNKNOWN), (_RET, 0, 0, _ERRNO | errno.ENOSYS),
        ]  # fmt: skip

    def deny(self, name: str, error: int = errno.EPERM) -> _Program:
        self.code += [(_JEQ, 0, 1, SYSCALLS[name]), (_RET, 0, 0, _ERRNO | error)]
        return self

    def deny_if_flags(self, name: str, arg: int, mask: int) -> _Program:
        """Refuse the call when any bit of ``mask`` is set in the low 32 bits of argument ``arg``."""
        self.code += [(_JEQ, 0, 4, SYSCALLS[name]), (_LD, 0, 0, _arg(arg)), (_JSET, 0, 1, mask & 0xFFFFFFFF),
                      (_RET, 0, 0, _ERRNO | errno.EPERM), (_LD, 0, 0, _NR)]  # fmt: skip
        return self

    def deny_if_set(self, name: str, arg: int) -> _Program:
        """Refuse the call when argument ``arg`` (a pointer) is not NULL."""
        self.code += [(_JEQ, 0, 6, SYSCALLS[name]), (_LD, 0, 0, _arg(arg)), (_JEQ, 0, 2, 0),
                      (_LD, 0, 0, _arg(arg, high=True)), (_JEQ, 1, 0, 0), (_RET, 0, 0, _ERRNO | errno.EPERM),
                      (_LD, 0, 0, _NR)]  # fmt: skip
        return self

    def deny_if_equal(self, name: str, arg: int, values: tuple[int, int]) -> _Program:
        """Refuse the call when the low 32 bits of argument ``arg`` are one of two ``values``."""
        self.code += [(_JEQ, 0, 5, SYSCALLS[name]), (_LD, 0, 0, _arg(arg)), (_JEQ, 1, 0, values[0]),
                      (_JEQ, 0, 1, values[1]), (_RET, 0, 0, _ERRNO | errno.EPERM), (_LD, 0, 0, _NR)]  # fmt: skip
        return self

    def assemble(self) -> bytes:
        program = [*self.code, (_RET, 0, 0, _ALLOW)]
        return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def _worker_filter() -> bytes:
    program = _Program()
    for name in _DENIED_BY_WORKER:
        program.deny(name)
    program.deny("clone3", errno.ENOSYS).deny("openat2", errno.ENOSYS)
    program.deny_if_flags("clone", 0, ~_FORK_FLAGS)  # a fork, nothing else: no thread, no namespace
    program.deny_if_flags("open", 1, _WRITE_OPEN).deny_if_flags("openat", 2, _WRITE_OPEN)
    return program.deny_if_equal("ioctl", 1, _TTY_INJECTION).assemble()


def _call_filter() -> bytes:
    program = _Program()
    for name in _DENIED_BY_CALL:
        program.deny(name)
    return program.deny_if_set("prlimit64", 2).assemble()


WORKER = _worker_filter()
CALL = _call_filter()


def unavailable() -> str | None:
    """Why this process cannot install the filters (None when it can)."""
    if not sys.platform.startswith("linux"):
        return f"seccomp is Linux's ({sys.platform} here)"
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"the filter's syscall table is x86_64's ({platform.machine()} here)"
    return None


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


class Prepared:
    """A filter made ready to install (its buffer and the C functions resolved), so installing it is two
    foreign calls: a copy of a worker installs ``CALL`` before anything else runs in it."""

    def __init__(self, program: bytes) -> None:
        self.buffer = ctypes.create_string_buffer(program, len(program))
        self.fprog = _Fprog(len(program) // 8, ctypes.addressof(self.buffer))

    def install(self) -> None:
        """Install the filter on this process (every thread), for good; raise OSError when the kernel refuses."""
        if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) refused")
        syscall_nr = ctypes.c_long(317)  # seccomp
        if _LIBC.syscall(syscall_nr, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(self.fprog)):
            raise OSError(ctypes.get_errno(), f"seccomp filter refused ({os.strerror(ctypes.get_errno())})")


def install(program: bytes) -> None:
    """Install ``program`` (``WORKER`` or ``CALL``) on this process."""
    Prepared(program).install()
