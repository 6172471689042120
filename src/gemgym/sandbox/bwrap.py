"""The ``bwrap`` backend: one bubblewrap sandbox per snippet, and what every bubblewrap sandbox is.

The sandbox sees a read-only view of the system directories and the Python installation only
(``/usr``, ``/lib*``, the interpreter's prefix and the venv it is the python of; not ``/etc``,
``/home``, ``/root`` or the working tree), with every dataset-like file and gemgym's own package
masked (:func:`answer_masks`), a private size-capped writable ``/tmp``, fresh ``/proc`` (``/proc/sys`` read-only) and
``/dev``, and no network (its own empty network namespace); ``/dev`` is read-only apart from a
size-capped ``/dev/shm``. It runs in new user, PID, IPC, UTS, mount and cgroup namespaces with
every capability dropped, no further user namespaces, a cleared environment and the seccomp
filter of :mod:`gemgym.sandbox._seccomp`.

**Never as host root.** bubblewrap itself is started through a launcher that joins the
sandbox's cgroups, takes a fresh session keyring, lowers ``RLIMIT_NOFILE`` and, when gemgym runs
as root, drops to a host uid leased to this sandbox alone (:func:`~gemgym.sandbox._host.lease_uid`)
first: the code inside runs as an unprivileged host uid of its own, so a write that escaped
``/proc`` or ``/sys`` would be refused by the host kernel too, and per-user kernel limits are
not shared with other sandboxes.

**Process and memory limits.** As root each sandbox has its own ``pids`` cgroup (the process
limit; ``RLIMIT_NPROC`` is not enforced for root) and, where one can be made, a ``memory`` cgroup
that caps the whole sandbox (:class:`~gemgym.sandbox._host.SandboxCgroup`); otherwise the process
count is capped by ``RLIMIT_NPROC`` on the uid and memory per process by ``RLIMIT_AS``, and
:attr:`~gemgym.sandbox.RunResult.memory_scope` says ``"process"`` (as root that needs
``Limits(memory_scope="process")``: a limit that cannot hold as asked raises).

The first process of the sandbox is gemgym's fork-server itself (``--as-pid-1``: no bubblewrap
init that a program could take over), which runs each snippet in a child and cleans up after it
(see :mod:`gemgym.sandbox._runner`). This backend starts one sandbox per snippet;
:class:`~gemgym.sandbox.pool.PoolSandbox` keeps them warm (costs in ``docs/benchmarks.md``).
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence

from gemgym.errors import ConfigError, SandboxError, SandboxUnavailableError
from gemgym.sandbox._bwrap_limits import (
    ProcessLimiter as ProcessLimiter,
    ProcessLimitMode as ProcessLimitMode,
    SandboxFallbackWarning as SandboxFallbackWarning,
    _nproc_per_namespace as _nproc_per_namespace,
    _required_scope as _required_scope,
    open_files as open_files,
)
from gemgym.sandbox._bwrap_mounts import (
    _DATA_FILE as _DATA_FILE,
    _PLAIN_MARKER as _PLAIN_MARKER,
    _SYSTEM_DIRS as _SYSTEM_DIRS,
    _gemgym_dir as _gemgym_dir,
    _includes_system_site as _includes_system_site,
    _package_trees as _package_trees,
    _python_dirs as _python_dirs,
    _scan_tree as _scan_tree,
    _venv_home as _venv_home,
    _venv_of as _venv_of,
    answer_masks as answer_masks,
    bwrap_argv as bwrap_argv,
    bwrap_binary as bwrap_binary,
    is_dataset_file as is_dataset_file,
)
from gemgym.sandbox._host import (
    CLEAN_ENV,
    NOBODY,
    LeasedUid,
    NotStarted,
    ServerProcess,
    WorkerDied,
    default_python,
    server_command,
    system_python,
    world_traversable,
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

__all__ = [
    "SYSTEM",
    "BwrapSandbox",
    "ProcessLimitMode",
    "SandboxFallbackWarning",
    "answer_masks",
    "bwrap_argv",
    "bwrap_available",
    "resolve_python",
]


INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: "
    "`dnf install bubblewrap`), or use backend='docker' with a running Docker engine, or — "
    "only on a machine you do not care about — backend='unsafe-local'"
)


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
    """The ``bwrap`` path, or :class:`SandboxUnavailableError` saying what to install.

    ``user``: the uid the sandbox will run as (``None``: this one); any unprivileged uid gives
    the same answer, so it is checked once, as :data:`NOBODY`.
    """
    problem = _probe(None if user is None else NOBODY)
    if problem is not None:
        raise SandboxUnavailableError(
            f"the bwrap sandbox is unavailable ({problem}); {INSTALL_HINT}"
        )
    exe = bwrap_binary()
    assert exe is not None
    return exe


# -- the interpreter -------------------------------------------------------------------------------

SYSTEM = "system"
"""``python="system"``: run programs on the system's ``python3`` (no venv's packages)."""

_warned_system = False


def _others_can(path: str, need: int) -> bool:
    try:
        return bool(os.stat(path).st_mode & need == need)
    except OSError:
        return False


def _unreadable(python: str, dirs: Sequence[str]) -> str | None:
    """What in the interpreter the sandbox's (other) uid could not read, even bound by fd."""
    real = os.path.realpath(python)
    if not _others_can(real, stat.S_IXOTH | stat.S_IROTH):
        return f"{real} is not readable and executable by other users"
    for d in dirs:
        for tree in [d, *_package_trees(d)]:
            if not _others_can(tree, stat.S_IXOTH | stat.S_IROTH):
                return f"{tree} is not readable by other users"
            site = os.path.join(tree, "site-packages")
            if tree != d and os.path.isdir(site) and not _others_can(site, 0o005):
                return f"{site} is not readable by other users"
    return None


def resolve_python(python: str | None, dropping: bool) -> tuple[str, tuple[str, ...]]:
    """The interpreter a sandbox runs, and its directories to bind from descriptors.

    ``python``: a path, ``None`` (this interpreter) or ``"system"`` (the system's
    ``python3``, without any venv's packages; warns once when that is not this interpreter).
    ``dropping``: the sandbox runs as another uid (gemgym runs as root). Directories the
    sandbox's uid cannot reach by name (a venv's base interpreter under ``/root``) are made
    reachable for it (see :func:`~gemgym.sandbox._host.launcher_argv`); the interpreter's own
    files must still be readable by others.

    Raises:
        ConfigError: ``python`` does not exist.
        SandboxUnavailableError: the sandbox's uid cannot run it; the message says what to pass.
    """
    global _warned_system
    if python == SYSTEM:
        found = system_python()
        if found is None:
            raise SandboxUnavailableError(
                "python='system' needs a python3 every user can read at /usr/bin/python3 or "
                "/usr/local/bin/python3 (Debian/Ubuntu: `apt-get install python3`); or pass "
                "python= another interpreter"
            )
        own = default_python()
        if (_venv_of(own) is not None or os.path.realpath(own) != os.path.realpath(found)) and (
            not _warned_system
        ):
            _warned_system = True
            warnings.warn(
                f"sandboxed programs run on {found}, without the packages of {sys.prefix} "
                "(python='system')",
                SandboxFallbackWarning,
                stacklevel=4,
            )
        return found, ()
    path = os.path.abspath(python or default_python())
    if not os.path.exists(path):
        raise ConfigError(f"sandbox interpreter {path!r} does not exist")
    if not dropping:
        return path, ()
    dirs = [
        d
        for d in _python_dirs(path)
        if not any(d == s or d.startswith(s + "/") for s in _SYSTEM_DIRS)
    ]
    problem = _unreadable(path, dirs)
    if problem is not None:
        raise SandboxUnavailableError(
            f"the sandbox's unprivileged uid cannot run {path} ({problem}); pass python= an "
            "interpreter every user can read (e.g. one of a venv made from /usr/bin/python3), "
            "or python='system' to run programs on the system's python3 without this "
            "environment's packages"
        )
    return path, tuple(d for d in dirs if not world_traversable(d))


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
        require_bwrap(self.limiter.probe_user())
        self.seccomp = seccomp_program()
        self.python, self.hidden_dirs = resolve_python(python, self.limiter.dropping)
        self.ro_paths = tuple(os.path.abspath(p) for p in ro_paths)

    def check(self, limits: Limits) -> None:
        """Validate the paths and the memory scope now (at construction, not at first run).

        Raises:
            ConfigError, SandboxUnavailableError: see :meth:`ProcessLimiter.check`.
        """
        self.limiter.check(limits)
        bwrap_argv(self.python, limits, self.ro_paths)

    def start(self, limits: Limits) -> ServerProcess:
        """A started sandbox (``tmp_size``, ``memory`` and ``max_processes`` are fixed per
        sandbox), running as a host uid of its own when gemgym runs as root.

        Raises:
            SandboxError: it did not start; the message says why.
        """
        cgroup = self.limiter.cgroup(limits)
        uid: int | None = None
        try:
            uid = self.limiter.lease()
            return ServerProcess(
                lambda fds: (
                    bwrap_argv(self.python, limits, self.ro_paths, fds[0])
                    + server_command(self.python)
                ),
                extra_fds=[self.seccomp],
                reveal=self.hidden_dirs,
                cgroup=cgroup,
                uid=uid,
                nofile=open_files(limits),
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            if isinstance(uid, LeasedUid):
                uid.release()
            raise

    def run(
        self, worker: ServerProcess, request: RunRequest, limits: Limits
    ) -> tuple[RunResult, bool]:
        """Run ``request`` on ``worker``; return the result and whether the worker is still fit.

        Raises:
            NotStarted: the worker was gone before the run started (retry on another one).
        """
        # RLIMIT_NPROC counts every process of the uid: taken afresh per run (the worker's own
        # uid as root, so only its own processes count).
        nproc = self.limiter.nproc(limits.max_processes, worker.uid)
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
            result, fit = launcher.run(worker, request, limits)
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
        python: the interpreter run inside: a path, ``None`` (this one, with its venv's
            packages) or ``"system"`` (the system's ``python3`` without them; warns once). One
            the sandbox's uid cannot read raises :class:`SandboxUnavailableError` saying so
            (see :func:`resolve_python`).
        ro_paths: extra host directories visible read-only inside.
        process_limit: ``"cgroup"``, ``"uid"`` or ``"auto"`` (cgroup when possible).

    Raises:
        SandboxUnavailableError: bubblewrap is missing or cannot create namespaces here, the
            sandbox's uid cannot run ``python``, or ``limits.memory`` cannot hold as asked.
        ConfigError: ``process_limit="uid"`` with a whole-sandbox memory scope.
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
        )
