"""Host-side machinery shared by the backends.

- :class:`SandboxCgroup`: the ``pids`` and ``memory`` cgroups (v1 or v2) of one sandbox;
- :func:`launcher_argv`: the small root-side launcher that puts a sandbox into its cgroups,
  gives it a fresh session keyring and drops to an unprivileged uid before ``exec``;
- :func:`spawn`: starts processes from one long-lived thread (bubblewrap's ``--die-with-parent``
  follows the thread that forked it, so a worker started from a short-lived thread would die with
  that thread);
- :class:`ServerProcess`: the host's end of the in-sandbox fork-server protocol
  (:mod:`gemgym.sandbox._runner`), used warm by the pool and once per run by the other backends.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import queue
import secrets
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gemgym.errors import SandboxError
from gemgym.sandbox import _children, _runner, _wire
from gemgym.sandbox.base import MemoryScope

__all__ = [
    "CLEAN_ENV",
    "NOBODY",
    "SandboxCgroup",
    "ServerProcess",
    "default_python",
    "launcher_argv",
    "server_command",
    "spawn",
    "user_process_count",
]

CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
"""The only environment variables a sandboxed program sees."""

NOBODY = 65534
"""The host uid sandboxes run as when gemgym runs as root."""

_START_TIMEOUT = 30.0


@functools.cache
def runner_source() -> str:
    """The program run inside: the sources of :mod:`gemgym.sandbox._wire`,
    :mod:`~gemgym.sandbox._children` and :mod:`~gemgym.sandbox._runner`, in that order."""
    texts = [Path(str(m.__file__)).read_text(encoding="utf-8") for m in (_wire, _children, _runner)]
    future = "from __future__ import annotations\n"
    return "\n".join([texts[0], *(t.replace(future, "", 1) for t in texts[1:])])


def server_command(python: str, isolated: bool = True) -> list[str]:
    """``python -I -c <runner>`` that serves run requests (see :mod:`gemgym.sandbox._runner`)."""
    return [python, "-I", "-c", f"{runner_source()}\nmain_server({isolated!r})\n"]


def _world_readable(path: str) -> bool:
    """Whether every directory on the way to ``path`` lets other users in."""
    p = Path(os.path.realpath(path))
    for part in [p, *p.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        need = stat.S_IXOTH if part != p else stat.S_IROTH
        if not mode & need:
            return False
    return True


def default_python(drop_uid: bool) -> str:
    """The interpreter to run snippets with: this one, unless the sandbox uid cannot read it."""
    own = os.path.abspath(sys.executable)  # started as ../venv/bin/python: no '..' inside
    if not drop_uid or _world_readable(own):
        return own
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate) and _world_readable(candidate):
            return candidate
    return own


def user_process_count(uid: int) -> int:
    """How many live processes ``uid`` has now (``RLIMIT_NPROC`` counts them all).

    Zombies are left out: they are about to be reaped, and counting them would let a run
    started just before that fork more than its limit once they are gone.
    """
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X"):
                count += 1
    return count


# -- cgroups ---------------------------------------------------------------------------------------

_CGROUP_FS = Path("/sys/fs/cgroup")
MEMORY_HEADROOM = 96 << 20
"""Memory a sandbox's cgroup allows beyond ``Limits.memory``: its server and test process."""


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller (and ``""`` for the v2 hierarchy)."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            found[c] = path
    return found


class SandboxCgroup:
    """The cgroups of one sandbox: a ``pids`` limit, and a ``memory`` limit where possible.

    As root, each sandbox gets its own cgroup in the ``pids`` and ``memory`` hierarchies (cgroup
    v1), or one cgroup with both controllers (v2), created *below this process's own cgroup* (so
    the machine's limits still apply) in a ``gemgym`` directory, and removed by :meth:`remove`;
    cgroups left by dead processes are swept when a new one is made. The memory limit covers
    every process of the sandbox together (plus :data:`MEMORY_HEADROOM` for the server and the
    test process), including ``tmpfs`` files; ``RLIMIT_AS`` alone is per process.
    """

    _counter = itertools.count()

    def __init__(self, max_pids: int, memory: int | None) -> None:
        self.dirs: list[Path] = []
        self.pids_dir: Path | None = None
        self.memory_dir: Path | None = None
        self.v2 = (_CGROUP_FS / "cgroup.controllers").exists()
        name = f"{os.getpid()}-{next(self._counter)}"
        own = _own_cgroups()
        try:
            if self.v2:
                self._make_v2(own.get("", "/"), name, max_pids, memory)
            else:
                self._make_v1(own, name, max_pids, memory)
        except OSError:
            self.remove()
            raise

    def _base(self, root: Path, own: str) -> Path:
        base = root / own.lstrip("/") / "gemgym"
        base.mkdir(exist_ok=True)
        for d in base.iterdir():  # cgroups of processes that died without removing theirs
            owner = d.name.split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    d.rmdir()
        return base

    def _make_v1(self, own: dict[str, str], name: str, max_pids: int, memory: int | None) -> None:
        pids = self._base(_CGROUP_FS / "pids", own.get("pids", "/")) / name
        pids.mkdir()
        self.dirs.append(pids)
        self.pids_dir = pids
        (pids / "pids.max").write_text(str(int(max_pids)))
        if memory is None or not (_CGROUP_FS / "memory").is_dir():
            return
        try:
            mem = self._base(_CGROUP_FS / "memory", own.get("memory", "/")) / name
            mem.mkdir()
        except OSError:
            return  # no memory cgroup: the run says so (memory_scope == "process")
        self.dirs.append(mem)
        (mem / "memory.limit_in_bytes").write_text(str(int(memory)))
        with contextlib.suppress(OSError):  # no swap accounting on this kernel
            (mem / "memory.memsw.limit_in_bytes").write_text(str(int(memory)))
        self.memory_dir = mem

    def _make_v2(self, own: str, name: str, max_pids: int, memory: int | None) -> None:
        parent = _CGROUP_FS / own.lstrip("/")
        with contextlib.suppress(OSError):  # refused when this cgroup holds processes itself
            (parent / "cgroup.subtree_control").write_text("+pids +memory")
        base = self._base(_CGROUP_FS, own)
        with contextlib.suppress(OSError):
            (base / "cgroup.subtree_control").write_text("+pids +memory")
        path = base / name
        path.mkdir()
        self.dirs.append(path)
        (path / "pids.max").write_text(str(int(max_pids)))
        self.pids_dir = path
        if memory is not None and (path / "memory.max").exists():
            (path / "memory.max").write_text(str(int(memory)))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
            self.memory_dir = path

    @classmethod
    @functools.cache
    def usable(cls) -> bool:
        """Whether this process can create the ``pids`` cgroups (root, a writable hierarchy)."""
        if os.geteuid() != 0:
            return False
        try:
            probe = cls(8, None)
        except OSError:
            return False
        probe.remove()
        return True

    @property
    def memory_scope(self) -> MemoryScope:
        """``"sandbox"`` when a memory cgroup limits the whole sandbox, else ``"process"``."""
        return "sandbox" if self.memory_dir is not None else "process"

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join these cgroups."""
        return [str(d / "cgroup.procs") for d in dict.fromkeys(self.dirs)]

    def _counter_value(self, path: Path | None, filename: str, key: str) -> int:
        if path is None:
            return 0
        try:
            for line in (path / filename).read_text().splitlines():
                k, _, value = line.partition(" ")
                if k == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def limit_hits(self) -> int:
        """How many forks the process limit refused so far."""
        return self._counter_value(self.pids_dir, "pids.events", "max")

    def oom_kills(self) -> int:
        """How many processes the memory limit killed so far."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        return self._counter_value(self.memory_dir, name, "oom_kill")

    def tasks(self) -> list[int]:
        """The threads in the sandbox now."""
        if self.pids_dir is None:
            return []
        name = "cgroup.threads" if self.v2 else "tasks"
        try:
            return [int(p) for p in (self.pids_dir / name).read_text().split()]
        except (OSError, ValueError):
            return []

    def remove(self) -> None:
        """Kill what is left in the cgroups and delete them."""
        for d in reversed(self.dirs):
            for _ in range(200):
                with contextlib.suppress(OSError):
                    if (d / "cgroup.kill").exists():
                        (d / "cgroup.kill").write_text("1")
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.01)
        self.dirs = []


# -- launching ---------------------------------------------------------------------------------

_LAUNCHER = r"""
import json, os, sys
spec = json.loads(sys.argv[1])
pid = str(os.getpid()).encode()
for path in spec["procs"]:
    fd = os.open(path, os.O_WRONLY)
    os.write(fd, pid)
    os.close(fd)
nr = spec["keyctl"]
if nr is not None:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr, 1, None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING, a new anonymous one
        sys.exit("gemgym launcher: could not join a new session keyring: errno %d" % ctypes.get_errno())
uid = spec["uid"]
if uid is not None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        sys.exit("gemgym launcher: could not drop to uid %d" % uid)
argv = spec["argv"]
os.execv(argv[0], argv)
"""


@functools.cache
def _keyctl_number() -> int | None:
    try:
        import pyseccomp

        return int(pyseccomp.resolve_syscall(pyseccomp.system_arch(), "keyctl"))
    except Exception:
        return None


def launcher_argv(argv: Sequence[str], cgroup: SandboxCgroup | None, uid: int | None) -> list[str]:
    """``argv`` started through the launcher: cgroups joined, a fresh session keyring, then
    ``uid`` (``None``: keep this process's uid), before anything of ``argv`` runs."""
    spec = {
        "procs": cgroup.procs_files if cgroup is not None else [],
        "keyctl": _keyctl_number(),
        "uid": uid,
        "argv": list(argv),
    }
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec)]


class _Spawner:
    """Runs ``subprocess.Popen`` in one long-lived daemon thread."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = (
            queue.SimpleQueue()
        )
        self.thread = threading.Thread(
            target=self._loop, name="gemgym-sandbox-spawner", daemon=True
        )
        self.thread.start()

    def _loop(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box.append((True, fn()))
            except BaseException as e:
                box.append((False, e))
            done.set()

    def call(self, fn: Callable[[], Any]) -> Any:
        box: list[tuple[bool, Any]] = []
        done = threading.Event()
        self.jobs.put((fn, box, done))
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value


_SPAWNER: _Spawner | None = None
_SPAWNER_LOCK = threading.Lock()


def _reset_spawner() -> None:
    global _SPAWNER, _SPAWNER_LOCK
    _SPAWNER, _SPAWNER_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_reset_spawner)


def spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **kwargs)``, forked from gemgym's long-lived spawner thread."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None or not _SPAWNER.thread.is_alive():
            _SPAWNER = _Spawner()
        spawner = _SPAWNER
    proc: subprocess.Popen[bytes] = spawner.call(lambda: subprocess.Popen(list(argv), **kwargs))
    return proc


# -- the server protocol -------------------------------------------------------------------------


class NotStarted(Exception):
    """The worker died or did not answer before the run started (safe to retry elsewhere)."""


class WorkerDied(Exception):
    """The worker died or did not answer during a run."""


class ServerProcess:
    """A started in-sandbox fork-server and the pipes to it.

    Args:
        make_argv: builds the command line from the fd numbers that must reach the sandbox
            (``extra_fds``' read ends, in order).
        extra_fds: data handed to the sandbox through inherited pipes (the seccomp program).
        cgroup: the sandbox's cgroups (joined before anything runs), if any.
        uid: the host uid to drop to (``None``: stay this uid).
        on_close: called after the process was killed (e.g. to remove a container).

    Raises:
        SandboxError: the server did not start; the message has its error output.
    """

    def __init__(
        self,
        make_argv: Callable[[list[int]], list[str]],
        *,
        extra_fds: Sequence[bytes] = (),
        cgroup: SandboxCgroup | None = None,
        uid: int | None = None,
        on_close: Callable[[], None] | None = None,
        cwd: str = "/",
        start_timeout: float = _START_TIMEOUT,
    ) -> None:
        self.cgroup = cgroup
        self.on_close = on_close
        self.closed = False
        self.counters = (0, 0)
        """The cgroup's refused forks and OOM kills as of the end of the last run."""
        readers = []
        for data in extra_fds:
            r, w = os.pipe()
            with os.fdopen(w, "wb") as f:
                f.write(data)
            readers.append(r)
        argv = launcher_argv(make_argv(readers), cgroup, uid)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        try:
            self.proc = spawn(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=CLEAN_ENV,
                cwd=cwd,
                start_new_session=True,
                pass_fds=readers,
            )
        except OSError as e:
            self._log.close()
            raise SandboxError(f"the sandbox could not start: {e}") from e
        finally:
            for r in readers:
                os.close(r)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out = self.proc.stdout.fileno()
        self._in = self.proc.stdin.fileno()
        os.set_blocking(self._in, False)
        try:
            ready = self._read(6, time.monotonic() + start_timeout)
        except WorkerDied as e:
            ready = str(e).encode()
        if ready != b"READY\n":
            self.close()
            raise SandboxError(f"the sandbox did not start: {self.log() or ready.decode()}")

    def log(self) -> str:
        """What the sandbox wrote to its error output (bubblewrap's or the server's errors)."""
        try:
            self._log.seek(0)
            return self._log.read()[-4000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def _read(self, n: int, deadline: float) -> bytes:
        parts: list[bytes] = []
        while n > 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise WorkerDied("the sandbox worker did not answer in time")
            chunk = os.read(self._out, n)
            if not chunk:
                raise WorkerDied("the sandbox worker exited")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [self._in], [], left)[1]:
                raise OSError("the sandbox worker did not read in time")
            view = view[os.write(self._in, view[:65536]) :]

    def request(self, spec: dict[str, Any], wait: float) -> dict[str, Any]:
        """Send one run spec and return the response.

        Raises:
            NotStarted: the worker was gone before the run started.
            WorkerDied: it died, or did not answer within ``wait`` seconds, during the run.
        """
        nonce = secrets.token_hex(8)
        check = spec.get("check")
        spec = {**spec, "check": None, "tests": check is not None, "nonce": nonce}
        body = json.dumps(spec).encode()
        try:
            self._write(len(body).to_bytes(4, "big") + body, time.monotonic() + 10.0)
            if self._read(1, time.monotonic() + 10.0) != _wire.ACK:
                raise WorkerDied("the sandbox worker answered out of turn")
        except (OSError, WorkerDied) as e:
            raise NotStarted(f"the sandbox worker is gone ({e})") from e
        deadline = time.monotonic() + wait
        if check is not None:  # read by the test process, forked after the program
            tests = json.dumps({"check": check}).encode()
            try:
                self._write(len(tests).to_bytes(4, "big") + tests, deadline)
            except OSError as e:
                raise WorkerDied(f"the sandbox worker did not take the tests ({e})") from e
        size = int.from_bytes(self._read(4, deadline), "big")
        try:
            response = json.loads(self._read(size, deadline))
        except ValueError as e:
            raise WorkerDied(f"the sandbox worker sent a bad answer ({e})") from e
        if not isinstance(response, dict) or response.get("nonce") != nonce:
            raise WorkerDied("the sandbox worker gave an answer to another request")
        return response

    def leftover_tasks(self) -> int:
        """How many threads the sandbox's cgroup holds beyond bubblewrap's and the server's.

        (Counted, not named: the cgroup lists its threads in no particular order.)
        """
        if self.cgroup is None:
            return 0
        return max(0, len(self.cgroup.tasks()) - 2)

    def close(self) -> None:
        """Kill the sandbox and release everything (idempotent)."""
        if self.closed:
            return
        self.closed = True
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()
        if self.on_close is not None:
            self.on_close()
        if self.cgroup is not None:
            self.cgroup.remove()
