"""A small shared pool of grading processes with per-call time limits that work everywhere.

math-verify's own timeouts use ``signal.alarm``, which only works in the main thread, and even
there cannot interrupt a long C-level computation (``9^{9^{9^9}}`` in sympy). This pool runs
math-verify in worker processes and enforces the limit from the caller's side: a worker that
misses its deadline is killed and the call returns ``None``. Workers are forked from a warm
template process (:mod:`gemgym.grading._worker`), so a killed worker is replaced in milliseconds.
It works from any thread, in forked or spawned processes and in Ray workers alike.

One pool per process is shared by all envs (:func:`default_pool`): the template starts on first
use (about a second, to import and warm up math-verify) or on :meth:`GradingPool.warm_up` (which
the math envs' ``warmup`` calls, so that the episode engine starts it before the first episode),
workers are forked on demand up to ``max_workers`` concurrent calls, and everything exits with
the process (or :meth:`close`; a closed pool starts again on its next use). The template and the
workers also exit when their socket to this process closes, so none outlives it.
After a ``fork`` the child builds its own pool. POSIX only (Unix sockets, ``fork``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import NoReturn

from gemgym.errors import GradingError, missing_dependency

__all__ = ["GradingPool", "default_pool"]

_STARTUP_TIMEOUT = 120.0


def _recv_line(sock: socket.socket, deadline: float) -> bytes | None:
    """One reply line, or ``None`` on timeout or a closed socket."""
    buf = b""
    while not buf.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        readable, _, _ = select.select([sock], [], [], remaining)
        if not readable:
            return None
        try:
            chunk = sock.recv(4096)
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


class _Worker:
    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid

    def ask(self, gold: str, pred: str, timeout: float) -> bool | None:
        try:
            self.sock.sendall((json.dumps({"gold": gold, "pred": pred}) + "\n").encode())
        except OSError:
            return None
        line = _recv_line(self.sock, time.monotonic() + timeout)
        if line is None:
            return None
        try:
            return bool(json.loads(line)["ok"])
        except (ValueError, KeyError):
            return None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self.sock.close()


class _Template:
    """The warm process that forks workers."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gemgym.grading._worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        theirs.close()
        self.ctrl = ours
        self.ready = False
        self.lock = threading.Lock()

    def _wait_ready(self) -> bool:
        """Wait for the template's ``ready`` (math-verify imported and warm); hold ``lock``."""
        if not self.ready:
            if _recv_line(self.ctrl, time.monotonic() + _STARTUP_TIMEOUT) != b"ready\n":
                return False
            self.ready = True
        return True

    def wait_ready(self) -> bool:
        """Whether the template is ready, waiting for it if it is starting (``False``: dead)."""
        with self.lock:
            return self._wait_ready()

    def fork_worker(self) -> _Worker | None:
        """A new worker, or ``None`` if the template is dead."""
        with self.lock:
            if not self._wait_ready():
                return None
            try:
                ours, theirs = socket.socketpair()
            except OSError:
                return None
            try:
                socket.send_fds(self.ctrl, [b"F"], [theirs.fileno()])
                line = _recv_line(self.ctrl, time.monotonic() + 30)
            except OSError:
                line = None
            finally:
                theirs.close()
            try:
                pid = int(line) if line is not None else None
            except ValueError:
                pid = None
            if pid is None:
                ours.close()
                return None
            return _Worker(ours, pid)

    def close(self) -> None:
        self.ctrl.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class GradingPool:
    """Worker processes that run math-verify with a caller-enforced time limit.

    Args:
        max_workers: most concurrent calls (default ``min(4, cpu count)``); more wait.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or max(1, min(4, os.cpu_count() or 1))
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._template: _Template | None = None
        self._template_lock = threading.Lock()

    def _template_now(self) -> _Template | None:
        """The template, started if there is none (``None``: it could not be started)."""
        with self._template_lock:
            if self._template is None:
                try:
                    self._template = _Template()
                except OSError:  # no process or socket could be made (limits, fds)
                    return None
            return self._template

    def _drop_template(self, template: _Template | None) -> None:
        """Stop a dead ``template`` (unless another thread replaced it already)."""
        if template is None:
            return
        with self._template_lock:
            if self._template is template:
                template.close()
                self._template = None

    @staticmethod
    def _start_failed() -> NoReturn:
        """Raise why the grading process did not start."""
        try:
            import math_verify  # noqa: F401
        except ImportError as e:
            raise missing_dependency("math-verify", "math") from e
        raise GradingError(
            "the math grading process did not start; run "
            "`python -c 'import math_verify'` to see why"
        )

    def _new_worker(self) -> _Worker:
        for _ in range(2):  # a dead template is replaced once
            template = self._template_now()
            worker = template.fork_worker() if template is not None else None
            if worker is not None:
                return worker
            self._drop_template(template)
        self._start_failed()

    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._count >= self.max_workers:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return self._new_worker()
        except BaseException:
            self._release(None)
            raise

    def _release(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is None:
                self._count -= 1
            else:
                self._idle.append(worker)
            self._cond.notify()

    def verify(self, gold: str, pred: str, timeout: float) -> bool | None:
        """Whether math-verify judges ``pred`` equal to ``gold``; ``None`` if it ran out of time."""
        worker = self._acquire()
        result = worker.ask(gold, pred, timeout)
        if result is None:  # stuck or dead: kill it; the next call forks a fresh one
            worker.kill()
            self._release(None)
            return None
        self._release(worker)
        return result

    def warm_up(self) -> None:
        """Start the template process and a worker now, and wait until they are ready, so
        that no grading (and no timing) pays the start-up.

        Idempotent and cheap once done; safe from several threads at once (one template is
        started, and one worker for all of them); never waits for a busy worker.

        Raises:
            GradingError: the grading process did not start.
            DependencyNotInstalled: math-verify is missing.
        """
        with self._cond:
            fork = self._count == 0  # no worker yet, idle or busy: start one
            if fork:
                self._count += 1
        if fork:
            try:
                worker = self._new_worker()
            except BaseException:
                self._release(None)
                raise
            self._release(worker)
            return
        for _ in range(2):  # workers exist: make sure their template is up to fork more
            template = self._template_now()
            if template is not None and template.wait_ready():
                return
            self._drop_template(template)
        self._start_failed()

    @property
    def ready(self) -> bool:
        """Whether the template process runs and is ready to fork workers."""
        with self._template_lock:
            template = self._template
        return template is not None and template.ready and template.proc.poll() is None

    def pids(self) -> list[int]:
        """The process ids of the template and the idle workers (for checks and tests)."""
        with self._template_lock:
            template = self._template
        with self._cond:
            workers = [w.pid for w in self._idle]
        return ([template.proc.pid] if template is not None else []) + workers

    def close(self) -> None:
        """Stop the template and the idle workers (busy ones stop when their call returns)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for w in idle:
            w.kill()
        with self._template_lock:
            if self._template is not None:
                self._template.close()
                self._template = None


_POOL: GradingPool | None = None
_POOL_PID = -1
_POOL_LOCK = threading.Lock()


def default_pool() -> GradingPool:
    """The process-wide pool (a new one after ``fork``)."""
    global _POOL, _POOL_PID
    pid = os.getpid()
    if _POOL is None or pid != _POOL_PID:
        with _POOL_LOCK:
            if _POOL is None or pid != _POOL_PID:
                _POOL = GradingPool()
                _POOL_PID = pid
    return _POOL


def _close_default() -> None:
    if _POOL is not None and os.getpid() == _POOL_PID:
        _POOL.close()


atexit.register(_close_default)
