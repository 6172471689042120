"""Host-side helpers shared by the backends: the runner's source, process limits, one-shot runs."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gemgym.sandbox import _runner
from gemgym.sandbox.base import Limits, RunRequest, RunResult, build_result

__all__ = [
    "CLEAN_ENV",
    "PidsCgroup",
    "default_python",
    "oneshot_command",
    "run_process",
    "server_command",
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


@functools.cache
def runner_source() -> str:
    """The source text of :mod:`gemgym.sandbox._runner`."""
    return Path(_runner.__file__).read_text(encoding="utf-8")


def oneshot_command(python: str, status_fd: int) -> list[str]:
    """``python -I -c <runner>`` for one snippet, reporting on ``status_fd``."""
    return [python, "-I", "-c", f"{runner_source()}\nmain_oneshot({int(status_fd)})\n"]


def server_command(python: str) -> list[str]:
    """``python -I -c <runner>`` that serves requests as a warm fork-server."""
    return [python, "-I", "-c", f"{runner_source()}\nmain_server()\n"]


def encode_spec(request: RunRequest, limits: Limits, nproc: int | None) -> bytes:
    """The stdin of a one-shot runner: ``<length>\\n<spec json>`` then the program's stdin."""
    spec = request.spec(limits, nproc)
    stdin = str(spec.pop("stdin")).encode()
    body = json.dumps(spec).encode()
    return str(len(body)).encode() + b"\n" + body + stdin


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
    if not drop_uid or _world_readable(sys.executable):
        return sys.executable
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate) and _world_readable(candidate):
            return candidate
    return sys.executable


# -- process-count limits ---------------------------------------------------------------------


class PidsCgroup:
    """A cgroup (v1 ``pids`` hierarchy) capping the processes of one sandbox.

    ``RLIMIT_NPROC`` is not enforced for root, so as root each sandbox runs in its own cgroup
    with ``pids.max`` set. It is created under ``/sys/fs/cgroup/pids/gemgym/`` and removed by
    :meth:`remove`; cgroups left by dead processes are swept when a new one is made.
    """

    ROOT = Path("/sys/fs/cgroup/pids")
    _counter = itertools.count()

    def __init__(self, max_pids: int) -> None:
        base = self.ROOT / "gemgym"
        base.mkdir(exist_ok=True)
        self._sweep(base)
        self.path = base / f"{os.getpid()}-{next(self._counter)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(int(max_pids)))

    @classmethod
    @functools.cache
    def usable(cls) -> bool:
        """Whether this process can create pids cgroups (root, cgroup v1 mounted read-write)."""
        if os.geteuid() != 0 or not cls.ROOT.is_dir():
            return False
        try:
            probe = cls(8)
        except OSError:
            return False
        probe.remove()
        return True

    @staticmethod
    def _sweep(base: Path) -> None:
        for d in base.iterdir():
            owner = d.name.split("-", 1)[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    d.rmdir()

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` started inside this cgroup (the shell joins it, then execs ``argv``)."""
        procs = str(self.path / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]

    def limit_hits(self) -> int:
        """How many forks the limit refused so far."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kill what is left in the cgroup and delete it."""
        for _ in range(100):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.01)


def user_process_count(uid: int) -> int:
    """How many processes ``uid`` has now (``RLIMIT_NPROC`` counts them all)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


# -- one-shot runs ----------------------------------------------------------------------------


def run_process(
    make_argv: Callable[[int], list[str]],
    request: RunRequest,
    limits: Limits,
    *,
    nproc: int | None,
    cwd: str | None = None,
    status: bool = True,
    kill_extra: Callable[[], None] | None = None,
    user: int | None = None,
    cgroup: PidsCgroup | None = None,
    init_reports_signals: bool = False,
) -> RunResult:
    """Run a one-shot runner command (``make_argv(status_fd)``) and collect its result.

    The process starts in a new session; on timeout or excess output its process group is
    killed (and ``kill_extra`` is called, e.g. to stop a container). With
    ``init_reports_signals`` an exit status 128 + N (how bwrap's init and Docker report a child
    killed by signal N) is turned back into ``-N``.
    """
    status_r, status_w = os.pipe() if status else (-1, -1)
    argv = make_argv(status_w)
    if cgroup is not None:
        argv = cgroup.wrap(argv)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=CLEAN_ENV,
            cwd=cwd or "/",
            start_new_session=True,
            pass_fds=(status_w,) if status else (),
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
    except OSError as e:
        if status:
            os.close(status_r)
            os.close(status_w)
        return build_result("", "", None, None, "", 0.0, error=f"could not start: {e}")
    if status:
        os.close(status_w)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def kill() -> None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        if kill_extra is not None:
            kill_extra()

    fds = [proc.stdout.fileno(), proc.stderr.fileno()] + ([status_r] if status else [])
    data = encode_spec(request, limits, nproc)
    pidfd = os.pidfd_open(proc.pid)
    try:
        outs, reason = _runner.pump(
            os.dup(proc.stdin.fileno()),
            data,
            [os.dup(fd) for fd in fds[:2]] + fds[2:],
            start + limits.timeout,
            limits.max_output,
            kill,
            exit_fd=pidfd,
        )
    finally:
        os.close(pidfd)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    try:
        code = proc.wait(timeout=max(0.05, start + limits.timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        reason = reason or "timeout"
        kill()
        code = proc.wait()
    duration = time.monotonic() - start
    if init_reports_signals and 128 < code < 160:
        code = 128 - code
    with contextlib.suppress(OSError):  # background processes left in the group
        os.killpg(proc.pid, signal.SIGKILL)
    hits = cgroup.limit_hits() if cgroup is not None else 0
    return build_result(
        outs[0],
        outs[1],
        code,
        reason,
        outs[2] if status else b"",
        duration,
        process_limit_hit=hits > 0,
    )
