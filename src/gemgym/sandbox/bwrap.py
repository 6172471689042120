"""The ``bwrap`` backend: one bubblewrap sandbox per snippet.

The sandbox sees a read-only view of the system directories and the Python installation only
(``/usr``, ``/lib*``, the interpreter's prefix; not ``/etc``, ``/home``, ``/root`` or the working
tree), a private size-capped writable ``/tmp``, fresh ``/proc`` and ``/dev``, and no network
(its own empty network namespace); ``/dev`` is read-only apart from a
size-capped ``/dev/shm``. It runs in new user, PID, IPC, UTS, mount and cgroup
namespaces with every capability dropped and a cleared environment; when the sandbox's first
process exits, the kernel kills everything else in its PID namespace.

Process counts are capped by a ``pids`` cgroup when this process is root and cgroup v1 is
writable, otherwise by running as uid 65534 (``nobody``) with ``RLIMIT_NPROC``
(``RLIMIT_NPROC`` is not enforced for root). Each snippet costs a fresh interpreter start (about
35 ms); :class:`~gemgym.sandbox.pool.PoolSandbox` amortises it to about 2 ms.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Literal

from gemgym.errors import ConfigError, SandboxUnavailableError
from gemgym.sandbox._host import (
    CLEAN_ENV,
    NOBODY,
    PidsCgroup,
    default_python,
    oneshot_command,
    run_process,
    user_process_count,
)
from gemgym.sandbox.base import Limits, RunRequest, RunResult, Sandbox

__all__ = ["BwrapSandbox", "ProcessLimitMode", "bwrap_argv", "bwrap_available"]

ProcessLimitMode = Literal["auto", "cgroup", "uid"]
"""How process counts are capped (see the module docstring)."""

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: "
    "`dnf install bubblewrap`), or use backend='docker' with a running Docker engine, or — "
    "only on a machine you do not care about — backend='unsafe-local'"
)


def bwrap_binary() -> str | None:
    """The path of ``bwrap``, if installed."""
    return shutil.which("bwrap")


@functools.cache
def _probe(user: int | None) -> str | None:
    exe = bwrap_binary()
    if exe is None:
        return "bwrap is not installed"
    argv = [exe, "--ro-bind", "/", "/", "--unshare-all", "--cap-drop", "ALL", "/bin/true"]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            timeout=10,
            env=CLEAN_ENV,
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap could not start: {e}"
    if done.returncode != 0:
        return f"bwrap failed: {done.stderr.decode(errors='replace').strip()}"
    return None


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and can create namespaces here."""
    return _probe(None) is None


def require_bwrap(user: int | None = None) -> str:
    """The ``bwrap`` path, or :class:`SandboxUnavailableError` saying what to install."""
    problem = _probe(user)
    if problem is not None:
        raise SandboxUnavailableError(
            f"the bwrap sandbox is unavailable ({problem}); {INSTALL_HINT}"
        )
    exe = bwrap_binary()
    assert exe is not None
    return exe


def _python_dirs(python: str) -> list[str]:
    """Directories the interpreter needs (its prefix, and the venv it belongs to)."""
    dirs = {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        dirs.add(venv)
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        dirs.update({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})
    return sorted(dirs)


def bwrap_argv(python: str, limits: Limits, ro_paths: Sequence[str] = ()) -> list[str]:
    """The bubblewrap command line (without the program) for ``python`` under ``limits``."""
    exe = bwrap_binary() or "bwrap"
    args = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--clearenv"]
    for key, value in CLEAN_ENV.items():
        args += ["--setenv", key, value]
    bound: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
            bound.append(d)
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(int(limits.tmp_size)), "--tmpfs", "/tmp"]
    args += ["--size", str(int(limits.tmp_size)), "--tmpfs", "/dev/shm"]
    # Bound after the private /tmp, so an interpreter or venv that lives under /tmp (a CI
    # checkout, say) stays visible on top of it.
    for d in [*_python_dirs(python), *ro_paths]:
        d = os.path.abspath(d)
        if any(d == b or d.startswith(b + "/") for b in bound):
            continue
        if not os.path.exists(d):
            raise ConfigError(f"sandbox path {d!r} does not exist")
        args += ["--ro-bind", d, d]
        bound.append(d)
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    return args


class ProcessLimiter:
    """Chooses how a backend caps process counts (see the module docstring)."""

    def __init__(self, mode: ProcessLimitMode) -> None:
        if mode not in ("auto", "cgroup", "uid"):
            raise ConfigError(f"process_limit must be 'auto', 'cgroup' or 'uid', got {mode!r}")
        if mode == "auto":
            mode = "cgroup" if PidsCgroup.usable() else "uid"
        if mode == "cgroup" and not PidsCgroup.usable():
            raise SandboxUnavailableError(
                "pids cgroups need root and a writable /sys/fs/cgroup/pids; use "
                "process_limit='uid' (runs as uid 65534 with RLIMIT_NPROC)"
            )
        self.mode = mode
        self.user = NOBODY if mode == "uid" and os.geteuid() == 0 else None

    def nproc(self, max_processes: int) -> int | None:
        """The ``RLIMIT_NPROC`` to set (counts all processes of the uid), or ``None``."""
        if self.mode == "cgroup":
            return None
        uid = self.user if self.user is not None else os.getuid()
        return user_process_count(uid) + max_processes

    def cgroup(self, max_processes: int) -> PidsCgroup | None:
        """A fresh cgroup for one sandbox (``None`` when limiting by uid)."""
        return PidsCgroup(max_processes) if self.mode == "cgroup" else None


class BwrapSandbox(Sandbox):
    """One bubblewrap sandbox per snippet (see the module docstring).

    Args:
        limits: the default :class:`Limits` of every run.
        parallelism: runs at once in :meth:`run_many`.
        python: the interpreter run inside (default: this one, or ``/usr/bin/python3`` when
            the sandbox uid cannot read this one).
        ro_paths: extra host directories visible read-only inside.
        process_limit: ``"cgroup"``, ``"uid"`` or ``"auto"`` (cgroup when possible).

    Raises:
        SandboxUnavailableError: bubblewrap is missing or cannot create namespaces here.
    """

    name = "bwrap"

    def __init__(
        self,
        limits: Limits | None = None,
        parallelism: int = 2,
        python: str | None = None,
        ro_paths: Sequence[str] = (),
        process_limit: ProcessLimitMode = "auto",
    ) -> None:
        super().__init__(limits, parallelism)
        self.limiter = ProcessLimiter(process_limit)
        require_bwrap(self.limiter.user)
        self.python = python or default_python(self.limiter.user is not None)
        self.ro_paths = tuple(ro_paths)
        self._args = (self.limits, parallelism, python, self.ro_paths, self.limiter.mode)
        bwrap_argv(self.python, self.limits, self.ro_paths)  # validates the paths now

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        prefix = bwrap_argv(self.python, limits, self.ro_paths)
        cgroup = self.limiter.cgroup(limits.max_processes + 2)
        try:
            result = run_process(
                lambda fd: prefix + oneshot_command(self.python, fd),
                request,
                limits,
                nproc=self.limiter.nproc(limits.max_processes),
                user=self.limiter.user,
                cgroup=cgroup,
                init_reports_signals=True,
            )
        finally:
            if cgroup is not None:
                cgroup.remove()
        return result
