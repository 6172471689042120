"""Host-side machinery shared by the backends.

- :class:`SandboxCgroup`: the ``pids`` and ``memory`` cgroups (v1 or v2) of one sandbox;
- :func:`lease_uid`: a host uid of its own for each live sandbox (as root), from a range no
  account uses, locked across processes;
- :func:`launcher_argv`: the small root-side launcher that puts a sandbox into its cgroups,
  gives it a fresh session keyring, lowers its open-file limit and drops to the sandbox's uid
  before ``exec``;
- :func:`spawn`: starts processes from one long-lived thread (bubblewrap's ``--die-with-parent``
  follows the thread that forked it, so a worker started from a short-lived thread would die with
  that thread);
- :class:`ServerProcess`: the host's end of the in-sandbox fork-server protocol
  (:mod:`gemgym.sandbox._runner`), used warm by the pool and once per run by the other backends.
"""

from __future__ import annotations

import contextlib
import functools
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
from gemgym.sandbox._cgroup import MEMORY_HEADROOM as MEMORY_HEADROOM, SandboxCgroup
from gemgym.sandbox._uids import UID_RANGE, LeasedUid, lease_uid, user_process_count

__all__ = [
    "CLEAN_ENV",
    "NOBODY",
    "UID_RANGE",
    "LeasedUid",
    "SandboxCgroup",
    "ServerProcess",
    "default_open_files",
    "default_python",
    "launcher_argv",
    "lease_uid",
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
"""The conventional unprivileged uid (Docker containers run as it)."""

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


def world_traversable(path: str) -> bool:
    """Whether other users can reach ``path`` (every directory above it lets them in)."""
    return _world_readable(os.path.dirname(os.path.realpath(path))) if path != "/" else True


def default_python() -> str:
    """The interpreter to run snippets with by default: this one (``sys.executable``)."""
    return os.path.abspath(sys.executable)  # started as ../venv/bin/python: no '..' inside


SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
"""Where ``python="system"`` looks for the system's interpreter, in order."""


def system_python() -> str | None:
    """The system's ``python3`` that every uid can read, if there is one."""
    for candidate in SYSTEM_PYTHONS:
        if os.path.exists(candidate) and _world_readable(candidate):
            return candidate
    return None


def default_open_files(max_processes: int) -> int:
    """The ``RLIMIT_NOFILE`` of every sandboxed process, so that a whole sandbox
    (``max_processes`` + 3 processes: its server and test process, and the pids cgroup's slack)
    holds at most 1 % of the host's ``fs.file-max`` descriptors; between 32 and 1024."""
    try:
        with open("/proc/sys/fs/file-max", encoding="ascii") as f:
            file_max = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        file_max = 1 << 20
    return max(32, min(1024, file_max // 100 // (int(max_processes) + 3)))


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
if spec["reveal"]:
    # Interpreter directories the sandbox's uid cannot reach by name (under /root, say): in a
    # private mount namespace of this launcher, the first directory that blocks the way is
    # covered with an empty tmpfs that others may enter, and each one is bound back at its path.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def check(ok, what):
        if ok != 0:
            sys.exit("gemgym launcher: %s failed: errno %d" % (what, ctypes.get_errno()))
    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "making / private")
    for cover, dirs in spec["reveal"]:
        fds = [os.open(d, os.O_PATH | os.O_DIRECTORY) for d in dirs]
        check(libc.mount(b"tmpfs", cover.encode(), b"tmpfs", 0x2 | 0x4, b"mode=0755,size=16k"),
              "covering " + cover)
        for d, fd in zip(dirs, fds):
            os.makedirs(d, 0o755, exist_ok=True)
            check(libc.mount(("/proc/self/fd/%d" % fd).encode(), d.encode(), None, 0x1000 | 0x4000,
                             None), "binding " + d)
            os.close(fd)
nofile = spec["nofile"]
if nofile is not None:
    import resource
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
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


def _reveal_plan(dirs: Sequence[str]) -> list[tuple[str, list[str]]]:
    """For directories other users cannot reach by name: ``(cover, [dirs under it])`` pairs,
    ``cover`` being the first directory on the way that does not let others in."""
    plan: dict[str, list[str]] = {}
    for d in sorted({os.path.realpath(d) for d in dirs}, key=len):
        parts = Path(d).parts
        cover = None
        for i in range(2, len(parts)):
            p = str(Path(*parts[:i]))
            try:
                if not os.stat(p).st_mode & stat.S_IXOTH:
                    cover = p
                    break
            except OSError:
                break
        if cover is not None and not any(d.startswith(o + "/") for o in plan.get(cover, [])):
            plan.setdefault(cover, []).append(d)
    return sorted(plan.items())


def launcher_argv(
    argv: Sequence[str],
    cgroup: SandboxCgroup | None,
    uid: int | None,
    nofile: int | None = None,
    reveal: Sequence[str] = (),
) -> list[str]:
    """``argv`` started through the launcher: cgroups joined, a fresh session keyring,
    ``reveal``'s directories made reachable by name for other users in a private mount
    namespace (needs root), ``RLIMIT_NOFILE`` lowered to ``nofile`` (``None``: kept), then
    ``uid`` (``None``: keep this process's uid), before anything of ``argv`` runs."""
    spec = {
        "procs": cgroup.procs_files if cgroup is not None else [],
        "keyctl": _keyctl_number(),
        "reveal": _reveal_plan(reveal),
        "nofile": None if nofile is None else int(nofile),
        "uid": None if uid is None else int(uid),
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
        reveal: directories the sandbox's uid cannot reach by name (a venv's base interpreter
            under ``/root``), made reachable for it by the launcher (see :func:`launcher_argv`).
        cgroup: the sandbox's cgroups (joined before anything runs), if any.
        uid: the host uid to drop to (``None``: stay this uid). A :class:`LeasedUid` is
            released when the sandbox is closed.
        nofile: the ``RLIMIT_NOFILE`` of every process of the sandbox (default:
            :func:`default_open_files` of the default process limit).
        on_close: called after the process was killed (e.g. to remove a container).

    Raises:
        SandboxError: the server did not start; the message has its error output.
    """

    def __init__(
        self,
        make_argv: Callable[[list[int]], list[str]],
        *,
        extra_fds: Sequence[bytes] = (),
        reveal: Sequence[str] = (),
        cgroup: SandboxCgroup | None = None,
        uid: int | None = None,
        nofile: int | None = None,
        on_close: Callable[[], None] | None = None,
        cwd: str = "/",
        start_timeout: float = _START_TIMEOUT,
    ) -> None:
        self.cgroup = cgroup
        self.uid = uid
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
        if nofile is None:
            nofile = default_open_files(64)
        argv = launcher_argv(make_argv(readers), cgroup, uid, nofile, reveal)
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
            if isinstance(uid, LeasedUid):
                uid.release()
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
        if isinstance(self.uid, LeasedUid):
            # Every process of the sandbox is gone now (its PID namespace died with its first
            # process, and the cgroup was emptied), so the uid can serve another sandbox.
            self.uid.release()
