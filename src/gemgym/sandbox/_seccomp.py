"""The sandbox's seccomp filter, compiled once on the host with libseccomp (``pyseccomp``).

bubblewrap loads it (``--seccomp FD``) just before it starts the sandbox's first process, so it
holds for everything that runs inside: the fork-server, the program under test and the trusted
test process alike. Every other system call is allowed; these fail with ``EPERM`` (``ENOSYS``
for ``clone3``, so that the C library falls back to ``clone``, whose flags can be inspected):

- kernel keyrings (``keyctl``, ``add_key``, ``request_key``): the host's session keyring;
- process inspection and injection (``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``,
  ``kcmp``): a program taking over the server or the trusted test process;
- namespaces and mounts (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag,
  ``mount`` and the new mount API, ``pivot_root``, ``chroot``): new user namespaces regain
  capabilities;
- kernel attack surface a program has no use for (``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*``, ``kexec_*``, modules, ``open_by_handle_at``, ``reboot``, swap, ``acct``,
  ``quotactl``, clocks, ``syslog``, ``personality``, ``vhangup``, ``lookup_dcookie``, ``iopl``,
  ``ioperm``);
- another process's limits and scheduling (``prlimit64``, ``sched_set*``, ``setpriority``,
  ``ioprio_set``, ``migrate_pages``, ``move_pages`` on any pid but the caller's own): they need
  only the same uid, and would let a program weaken the server and so every later run;
- state that would outlive a run in a warm worker, or memory outside the limits: System V IPC
  (``shmget``, ``semget``, ``msgget`` and their calls), POSIX message queues (``mq_*``) and
  ``memfd_create``/``memfd_secret``.

System calls of another architecture (32-bit calls on x86-64) kill the calling thread
(libseccomp's default for a foreign architecture).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os

from gemgym.errors import SandboxUnavailableError

__all__ = ["DENIED", "seccomp_program"]

DENIED: tuple[str, ...] = (
    # keyrings
    "keyctl",
    "add_key",
    "request_key",
    # other processes
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    # namespaces and mounts
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # kernel attack surface
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "personality",
    "vhangup",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "fanotify_init",
    # state that outlives a run, memory outside the limits
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "semget",
    "semop",
    "semctl",
    "semtimedop",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "memfd_create",
    "memfd_secret",
)
"""System calls that fail with ``EPERM`` inside the sandbox."""

_SELF_ONLY: tuple[str, ...] = (
    "prlimit64",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setaffinity",
    "sched_setattr",
    "migrate_pages",
    "move_pages",
)
"""System calls that may change another process (of the same uid): allowed on pid 0 (the
caller) only, as are ``setpriority`` and ``ioprio_set`` on the calling process only."""

_CLONE_NEW_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00000080  # CLONE_NEWTIME
)

_INSTALL = (
    "the sandbox's seccomp filter needs libseccomp (Debian/Ubuntu: `apt-get install libseccomp2`; "
    'Fedora: `dnf install libseccomp`) and its Python binding (`pip install "pyseccomp>=0.1.2"`, '
    "a dependency of gemgym)"
)


@functools.cache
def seccomp_program() -> bytes:
    """The compiled BPF program (``struct sock_filter`` array) that bubblewrap loads.

    Raises:
        SandboxUnavailableError: libseccomp or ``pyseccomp`` is missing (fail closed).
    """
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as e:
        raise SandboxUnavailableError(f"{_INSTALL} ({e})") from e
    try:
        filt = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        deny = seccomp.ERRNO(errno.EPERM)
        for name in DENIED:
            try:
                filt.add_rule(deny, name)
            except (OSError, ValueError, RuntimeError):
                continue  # a call this architecture does not have
        # Settings of *another* process of the same uid (the server, the test process) need no
        # ptrace access: allowed only on the caller itself (pid 0).
        for name in _SELF_ONLY:
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                filt.add_rule(deny, name, seccomp.Arg(0, seccomp.NE, 0))
        for name, which in (("setpriority", 0), ("ioprio_set", 1)):  # PRIO_/IOPRIO_WHO_PROCESS
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                filt.add_rule(deny, name, seccomp.Arg(0, seccomp.NE, which))
                filt.add_rule(deny, name, seccomp.Arg(1, seccomp.NE, 0))
        # clone(flags, ...) with any namespace flag; clone3 hides its flags in memory.
        for bit in range(32):
            flag = 1 << bit
            if _CLONE_NEW_FLAGS & flag:
                filt.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            filt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        read, write = os.pipe()
        try:
            with os.fdopen(write, "wb") as out:
                filt.export_bpf(out)
            chunks = []
            while chunk := os.read(read, 65536):
                chunks.append(chunk)
        finally:
            os.close(read)
    except (OSError, ValueError, RuntimeError) as e:
        raise SandboxUnavailableError(f"could not build the seccomp filter: {e}; {_INSTALL}") from e
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise SandboxUnavailableError(f"libseccomp produced no filter program; {_INSTALL}")
    return program
