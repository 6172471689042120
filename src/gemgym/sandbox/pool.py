"""The ``pool`` backend: warm bubblewrap fork-servers, about 2 ms per snippet.

Each worker is one long-lived bubblewrap sandbox (the same isolation as
:class:`~gemgym.sandbox.bwrap.BwrapSandbox`) running a small server on an interpreter started
once. A snippet runs in a ``fork()`` child of the server, in its own session, with the run's
rlimits, in a fresh ``/tmp/work``. After every run the server kills every other process in the
sandbox's PID namespace (background processes and escaped sessions included) and empties
``/tmp``, so nothing carries over to the next snippet. The server is not ptrace-able by the
snippets, answers carry a per-request nonce, and a worker that dies or misbehaves is replaced.

Process counts are capped per worker (a ``pids`` cgroup as root, else uid 65534 with
``RLIMIT_NPROC``), as in the bwrap backend.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import select
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from gemgym.errors import SandboxError
from gemgym.sandbox._host import CLEAN_ENV, PidsCgroup, default_python, server_command
from gemgym.sandbox._runner import write_all
from gemgym.sandbox.base import Limits, RunRequest, RunResult, Sandbox, build_result
from gemgym.sandbox.bwrap import ProcessLimiter, ProcessLimitMode, bwrap_argv, require_bwrap

__all__ = ["PoolSandbox"]

_START_TIMEOUT = 30.0
_BACKSTOP = 5.0
"""Extra seconds the host waits for a worker's answer beyond the run's own timeout."""


class _WorkerDied(Exception):
    pass


class _Worker:
    """One warm sandbox running the fork-server."""

    def __init__(self, argv: list[str], user: int | None, cgroup: PidsCgroup | None) -> None:
        self.cgroup = cgroup
        if cgroup is not None:
            argv = cgroup.wrap(argv)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=CLEAN_ENV,
            cwd="/",
            start_new_session=True,
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out = self.proc.stdout.fileno()
        self._in = self.proc.stdin.fileno()
        deadline = time.monotonic() + _START_TIMEOUT
        if self._read(6, deadline) != b"READY\n":
            self.close()
            raise SandboxError("the sandbox fork-server did not start")

    def _read(self, n: int, deadline: float) -> bytes:
        parts: list[bytes] = []
        while n > 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                raise _WorkerDied("the sandbox worker did not answer in time")
            chunk = os.read(self._out, n)
            if not chunk:
                raise _WorkerDied("the sandbox worker exited")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def request(self, spec: dict[str, Any], wait: float) -> dict[str, Any]:
        nonce = secrets.token_hex(8)
        body = json.dumps({**spec, "nonce": nonce}).encode()
        try:
            write_all(self._in, len(body).to_bytes(4, "big") + body)
        except OSError as e:
            raise _WorkerDied(f"the sandbox worker is gone ({e})") from e
        deadline = time.monotonic() + wait
        size = int.from_bytes(self._read(4, deadline), "big")
        response = json.loads(self._read(size, deadline))
        if not isinstance(response, dict) or response.get("nonce") != nonce:
            raise _WorkerDied("the sandbox worker gave an answer to another request")
        return response

    def limit_hits(self) -> int:
        return self.cgroup.limit_hits() if self.cgroup is not None else 0

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, 9)
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        if self.cgroup is not None:
            self.cgroup.remove()


_LIVE: weakref.WeakSet[PoolSandbox] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for pool in list(_LIVE):
        pool.close()


class PoolSandbox(Sandbox):
    """A pool of warm bubblewrap fork-servers (see the module docstring).

    Args:
        limits: the default :class:`Limits` of every run (``tmp_size`` and ``max_processes``
            are fixed per worker when it starts).
        size: number of workers, i.e. runs at once (workers start on first use).
        python: the interpreter inside (default: this one, or ``/usr/bin/python3`` when the
            sandbox uid cannot read it).
        ro_paths: extra host directories visible read-only inside.
        process_limit: ``"cgroup"``, ``"uid"`` or ``"auto"``.

    Raises:
        SandboxUnavailableError: bubblewrap is missing or cannot create namespaces here.
    """

    name = "pool"

    def __init__(
        self,
        limits: Limits | None = None,
        size: int = 2,
        python: str | None = None,
        ro_paths: Sequence[str] = (),
        process_limit: ProcessLimitMode = "auto",
    ) -> None:
        super().__init__(limits, size)
        self.size = size
        self.limiter = ProcessLimiter(process_limit)
        require_bwrap(self.limiter.user)
        self.python = python or default_python(self.limiter.user is not None)
        self.ro_paths = tuple(ro_paths)
        self._argv = bwrap_argv(self.python, self.limits, self.ro_paths) + server_command(
            self.python
        )
        self._cv = threading.Condition()
        self._idle: list[_Worker] = []
        self._started = 0
        self._pid = os.getpid()
        self._args = (self.limits, size, python, self.ro_paths, self.limiter.mode)
        self._nproc: int | None = None
        _LIVE.add(self)

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:  # a forked copy: the parent's workers are not ours
            self._idle, self._started, self._pid = [], 0, os.getpid()
            self._cv = threading.Condition()

    def _new_worker(self) -> _Worker:
        cgroup = self.limiter.cgroup(self.limits.max_processes + 3)
        if self._nproc is None:
            self._nproc = self.limiter.nproc(self.limits.max_processes)
        try:
            return _Worker(self._argv, self.limiter.user, cgroup)
        except Exception:
            if cgroup is not None:
                cgroup.remove()
            raise

    def _acquire(self) -> _Worker:
        with self._cv:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._started < self.size:
                    self._started += 1
                    break
                self._cv.wait()
        try:
            return self._new_worker()
        except Exception:
            with self._cv:
                self._started -= 1
                self._cv.notify()
            raise

    def _release(self, worker: _Worker, broken: bool) -> None:
        if broken or self._closed:
            worker.close()
        with self._cv:
            if broken or self._closed:
                self._started -= 1
            else:
                self._idle.append(worker)
            self._cv.notify()

    def warm_up(self) -> None:
        """Start every worker now rather than on first use."""
        workers = [self._acquire() for _ in range(self.size)]
        for w in workers:
            self._release(w, False)

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        self._check_fork()
        worker = self._acquire()
        broken = False
        try:
            before = worker.limit_hits()
            spec = request.spec(limits, self._nproc)
            try:
                response = worker.request(spec, limits.timeout + _BACKSTOP)
            except _WorkerDied as e:
                broken = True
                return build_result("", "", None, None, "", 0.0, error=str(e))
            if "error" in response:
                broken = True
                return build_result("", "", None, None, "", 0.0, error=str(response["error"]))
            return build_result(
                response["stdout"],
                response["stderr"],
                response["exit_code"],
                response["reason"],
                response["status"],
                float(response["duration"]),
                process_limit_hit=worker.limit_hits() > before,
            )
        except BaseException:
            broken = True
            raise
        finally:
            self._release(worker, broken)

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        super().close()
        if os.getpid() != self._pid:
            return
        with self._cv:
            idle, self._idle = self._idle, []
            self._started -= len(idle)
        for w in idle:
            w.close()
