"""The ``bwrap`` backend: one bubblewrap sandbox per snippet, and what every bubblewrap sandbox is.

The sandbox sees a read-only view of the system directories and the Python installation only
(``/usr``, ``/lib*``, the interpreter's prefix; not ``/etc``, ``/home``, ``/root`` or the working
tree), a private size-capped writable ``/tmp``, fresh ``/proc`` (``/proc/sys`` read-only) and
``/dev``, and no network (its own empty network namespace); ``/dev`` is read-only apart from a
size-capped ``/dev/shm``. It runs in new user, PID, IPC, UTS, mount and cgroup namespaces with
every capability dropped, no further user namespaces, a cleared environment and the seccomp
filter of :mod:`gemgym.sandbox._seccomp`.

**Never as host root.** bubblewrap itself is started through a launcher that joins the
sandbox's cgroups, takes a fresh session keyring and, when gemgym runs as root, drops to uid
65534 (``nobody``) first: the code inside runs as an unprivileged host uid, so a write that
escaped ``/proc`` or ``/sys`` would be refused by the host kernel too.

**Process and memory limits.** As root each sandbox has its own ``pids`` cgroup (the process
limit; ``RLIMIT_NPROC`` is not enforced for root) and, where one can be made, a ``memory`` cgroup
that caps the whole sandbox (:class:`~gemgym.sandbox._host.SandboxCgroup`); otherwise the process
count is capped by ``RLIMIT_NPROC`` on the uid and memory per process by ``RLIMIT_AS``, and
:attr:`~gemgym.sandbox.RunResult.memory_scope` says ``"process"``.

The first process of the sandbox is gemgym's fork-server itself (``--as-pid-1``: no bubblewrap
init that a program could take over), which runs each snippet in a child and cleans up after it
(see :mod:`gemgym.sandbox._runner`). This backend starts one sandbox per snippet;
:class:`~gemgym.sandbox.pool.PoolSandbox` keeps them warm (costs in ``docs/benchmarks.md``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Literal

from gemgym.errors import ConfigError, SandboxError, SandboxUnavailableError
from gemgym.sandbox._host import (
    CLEAN_ENV,
    MEMORY_HEADROOM,
    NOBODY,
    NotStarted,
    SandboxCgroup,
    ServerProcess,
    WorkerDied,
    default_python,
    server_command,
    user_process_count,
)
from gemgym.sandbox._seccomp import seccomp_program
from gemgym.sandbox.base import (
    Limits,
    RunRequest,
    RunResult,
    Sandbox,
    failed_result,
    result_from_response,
)

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
    argv = [exe, "--ro-bind", "/", "/", "--unshare-all", "--unshare-user", "--cap-drop", "ALL"]
    argv += ["/bin/true"]
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
        who = "" if user is None else f" as uid {user} (user namespaces must be allowed for it)"
        return f"bwrap failed{who}: {done.stderr.decode(errors='replace').strip()}"
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
    python = os.path.abspath(python)
    dirs = {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    venv = os.path.dirname(os.path.dirname(python))
    if os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        dirs.add(venv)
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        dirs.update({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})
    return sorted(os.path.abspath(d) for d in dirs)


def bwrap_argv(
    python: str,
    limits: Limits,
    ro_paths: Sequence[str] = (),
    seccomp_fd: int | None = None,
    mounts: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command line (without the program) for ``python`` under ``limits``.

    ``seccomp_fd``: an fd the compiled seccomp program can be read from (inherited by bwrap).
    ``mounts``: further bubblewrap mount options, applied after the system directories and
    before everything is made read-only (a shell session's workspace and its hidden tests).
    """
    exe = bwrap_binary() or "bwrap"
    args = [exe, "--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1"]
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
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
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
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
    args += list(mounts)
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(int(seccomp_fd))]
    return args


class ProcessLimiter:
    """Chooses the host uid a sandbox runs as and how its processes are capped.

    As root, sandboxes always run as uid 65534, never as host uid 0; ``"cgroup"`` (the default
    where possible) gives each its own ``pids`` and ``memory`` cgroups, ``"uid"`` caps processes
    with ``RLIMIT_NPROC`` on that uid instead. Not as root, sandboxes run as this uid with
    ``RLIMIT_NPROC`` (``"uid"``).
    """

    def __init__(self, mode: ProcessLimitMode) -> None:
        if mode not in ("auto", "cgroup", "uid"):
            raise ConfigError(f"process_limit must be 'auto', 'cgroup' or 'uid', got {mode!r}")
        if mode == "auto":
            mode = "cgroup" if SandboxCgroup.usable() else "uid"
        if mode == "cgroup" and not SandboxCgroup.usable():
            raise SandboxUnavailableError(
                "pids cgroups need root and a writable /sys/fs/cgroup; use "
                "process_limit='uid' (RLIMIT_NPROC on the sandbox's uid)"
            )
        self.mode = mode
        self.user = NOBODY if os.geteuid() == 0 else None

    def nproc(self, max_processes: int) -> int | None:
        """The ``RLIMIT_NPROC`` to set (counts all processes of the uid), or ``None``."""
        if self.mode == "cgroup":
            return None
        uid = self.user if self.user is not None else os.getuid()
        return user_process_count(uid) + max_processes

    def cgroup(self, limits: Limits) -> SandboxCgroup | None:
        """Fresh cgroups for one sandbox (``None`` when limiting by uid)."""
        if self.mode != "cgroup":
            return None
        return SandboxCgroup(limits.max_processes + 3, int(limits.memory) + MEMORY_HEADROOM)


class BwrapLauncher:
    """Starts bubblewrap sandboxes running the fork-server, and runs requests on them.

    Shared by :class:`BwrapSandbox` (one sandbox per run) and the warm pool.

    Raises:
        SandboxUnavailableError: bubblewrap, user namespaces or libseccomp are missing here.
    """

    def __init__(
        self, python: str | None, ro_paths: Sequence[str], process_limit: ProcessLimitMode
    ) -> None:
        self.limiter = ProcessLimiter(process_limit)
        require_bwrap(self.limiter.user)
        self.seccomp = seccomp_program()
        self.python = os.path.abspath(python or default_python(self.limiter.user is not None))
        self.ro_paths = tuple(os.path.abspath(p) for p in ro_paths)

    def check(self, limits: Limits) -> None:
        """Validate the paths now (a :class:`ConfigError` at construction, not at first run)."""
        bwrap_argv(self.python, limits, self.ro_paths)

    def start(self, limits: Limits) -> ServerProcess:
        """A started sandbox (``tmp_size`` and ``max_processes`` are fixed per sandbox).

        Raises:
            SandboxError: it did not start; the message says why.
        """
        cgroup = self.limiter.cgroup(limits)
        try:
            return ServerProcess(
                lambda fds: (
                    bwrap_argv(self.python, limits, self.ro_paths, fds[0])
                    + server_command(self.python)
                ),
                extra_fds=[self.seccomp],
                cgroup=cgroup,
                uid=self.limiter.user,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise

    def run(
        self, worker: ServerProcess, request: RunRequest, limits: Limits, nproc: int | None
    ) -> tuple[RunResult, bool]:
        """Run ``request`` on ``worker``; return the result and whether the worker is still fit.

        Raises:
            NotStarted: the worker was gone before the run started (retry on another one).
        """
        cgroup = worker.cgroup
        scope = cgroup.memory_scope if cgroup is not None else "process"
        hits, ooms = worker.counters
        try:
            response = worker.request(request.spec(limits, nproc), limits.timeout + _BACKSTOP)
        except WorkerDied as e:
            if cgroup is not None and cgroup.oom_kills() > ooms:
                # The memory limit's OOM kill took the sandbox down (tmpfs files, or many small
                # processes, weigh on no single process): the program hit the limit.
                killed = {"exit_code": -9, "stdout": "", "stderr": "", "memory_error": True}
                return result_from_response(killed, oom_killed=True, memory_scope=scope), False
            return failed_result(f"{e} during the run", scope), False
        if "error" in response:
            return failed_result(str(response["error"]), scope), False
        problems = []
        if response.get("unclean"):
            problems.append(str(response["unclean"]))
        left = worker.leftover_tasks()
        if left:
            problems.append(f"{left} threads left in the sandbox's cgroup")
        notes: tuple[str, ...] = ()
        if problems:
            notes = (
                "the sandbox could not be verified clean after this run ("
                + "; ".join(problems)
                + "); it was retired and will be replaced",
            )
        if cgroup is not None:
            worker.counters = (cgroup.limit_hits(), cgroup.oom_kills())
        result = result_from_response(
            response,
            process_limit_hit=worker.counters[0] > hits,
            oom_killed=worker.counters[1] > ooms,
            memory_scope=scope,
            notes=notes,
        )
        return result, not problems


_BACKSTOP = 5.0
"""Extra seconds the host waits for a worker's answer beyond the run's own timeout."""
_RETRIES = 3
"""Fresh sandboxes tried for a run whose sandbox died before the program started."""


def run_with_retries(
    acquire: Callable[[], ServerProcess],
    release: Callable[[ServerProcess, bool], None],
    launcher: BwrapLauncher,
    request: RunRequest,
    limits: Limits,
    nproc: int | None,
) -> RunResult:
    """Run ``request`` on a sandbox from ``acquire``, on a fresh one if that one fails.

    A sandbox that died before the program started is replaced (up to :data:`_RETRIES`
    times); a run during which the sandbox itself failed is run once more on a fresh one, and
    its result carries ``error`` if that fails too.

    Raises:
        SandboxError: no sandbox could run it (each died before the program started).
    """
    causes = []
    failed: RunResult | None = None
    for _ in range(_RETRIES):
        worker = acquire()
        fit = False
        try:
            result, fit = launcher.run(worker, request, limits, nproc)
        except NotStarted as e:
            causes.append(str(e))
            continue
        finally:
            release(worker, fit)
        if result.error is None or failed is not None:
            return result
        failed = result
    if failed is not None:
        return failed
    raise SandboxError(
        f"the sandbox failed {_RETRIES} times before the program started: {'; '.join(causes)}"
    )


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
        self.launcher = BwrapLauncher(python, ro_paths, process_limit)
        self.limiter = self.launcher.limiter
        self.python = self.launcher.python
        self.ro_paths = self.launcher.ro_paths
        self._args = (self.limits, parallelism, python, self.ro_paths, self.limiter.mode)
        self.launcher.check(self.limits)

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        return run_with_retries(
            lambda: self.launcher.start(limits),
            lambda worker, fit: worker.close(),
            self.launcher,
            request,
            limits,
            self.limiter.nproc(limits.max_processes),
        )
