"""The ``pool`` backend: warm bubblewrap fork-servers (costs in ``docs/benchmarks.md``).

Each worker is one long-lived bubblewrap sandbox (the isolation of
:class:`~gemgym.sandbox.bwrap.BwrapSandbox`: an unprivileged host uid, seccomp, its own cgroups)
whose first process is a small server on an interpreter started once. A snippet runs in a
``fork()`` child of the server with the run's rlimits, in a fresh ``/tmp/work``; hidden tests run
in a second, trusted child. After every run the server kills every other process of the sandbox
whatever its state, empties ``/tmp`` and ``/dev/shm``, and verifies that nothing is left (no
process, file or System V IPC object) and that nothing the next run could read tells how this
one went (the network namespace's sockets and counters, the pid counter, ``tmpfs`` inode
numbers); the host checks the worker's cgroup too. A worker that cannot be verified clean is
retired (the run's :attr:`~gemgym.sandbox.RunResult.notes` say so) and replaced (in the
background as root; by the next run otherwise, so that no worker starts or stops behind a
run's ``RLIMIT_NPROC``). The server is PID 1 of its sandbox, not ptrace-able (seccomp and
``PR_SET_DUMPABLE``), and its answers carry a per-request nonce.

A run whose worker died before the program started is retried on a fresh worker; a sandbox that
cannot start raises :class:`~gemgym.errors.SandboxError` with the cause.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections.abc import Sequence

from gemgym.sandbox._host import ServerProcess
from gemgym.sandbox.base import Limits, RunRequest, RunResult, Sandbox
from gemgym.sandbox.bwrap import BwrapLauncher, ProcessLimitMode, run_with_retries

__all__ = ["PoolSandbox"]


_LIVE: weakref.WeakSet[PoolSandbox] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for pool in list(_LIVE):
        pool.close()


class PoolSandbox(Sandbox):
    """A pool of warm bubblewrap fork-servers (see the module docstring).

    Args:
        limits: the default :class:`Limits` of every run (``tmp_size``, ``memory`` for the
            sandbox's cgroup and ``max_processes`` are fixed per worker when it starts).
        size: number of workers, i.e. runs at once (workers start on first use).
        python: the interpreter inside: a path, ``None`` (this one, with its venv's
            packages) or ``"system"`` (the system's ``python3`` without them; warns once). One
            the sandbox's uid cannot read raises :class:`SandboxUnavailableError` saying so
            (see :func:`resolve_python`).
        ro_paths: extra host directories visible read-only inside.
        process_limit: ``"cgroup"``, ``"uid"`` or ``"auto"``.

    Raises:
        SandboxUnavailableError: bubblewrap is missing or cannot create namespaces here, the
            sandbox's uid cannot run ``python``, or ``limits.memory`` cannot hold as asked.
        ConfigError: ``process_limit="uid"`` with a whole-sandbox memory scope.
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
        self.launcher = BwrapLauncher(python, ro_paths, process_limit)
        self.limiter = self.launcher.limiter
        self.python = self.launcher.python
        self.ro_paths = self.launcher.ro_paths
        self.launcher.check(self.limits)
        self._cv = threading.Condition()
        self._idle: list[ServerProcess] = []
        self._started = 0
        self._pid = os.getpid()
        self._args = (self.limits, size, python, self.ro_paths, self.limiter.mode)
        self.retired = 0
        """Workers retired because they could not be verified clean after a run."""
        _LIVE.add(self)

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:  # a forked copy: the parent's workers are not ours
            self._idle, self._started, self._pid = [], 0, os.getpid()
            self._cv = threading.Condition()

    def _acquire(self) -> ServerProcess:
        with self._cv:
            while True:
                if self._idle:
                    return self._idle.pop()
                if self._started < self.size:
                    self._started += 1
                    break
                self._cv.wait()
        try:
            return self.launcher.start(self.limits)
        except BaseException:
            with self._cv:
                self._started -= 1
                self._cv.notify()
            raise

    def _release(self, worker: ServerProcess, fit: bool) -> None:
        keep = fit and not self._closed
        if keep:
            with self._cv:
                self._idle.append(worker)
                self._cv.notify()
            return
        if self._closed or os.getpid() != self._pid or self.limiter.mode == "uid":
            # With RLIMIT_NPROC (counted over the whole uid when each run starts) no worker
            # may start or stop behind a run's back, or the run could fork beyond its limit:
            # the next run starts the replacement itself.
            worker.close()
            with self._cv:
                self._started -= 1
                self._cv.notify()
            return
        # A retired worker is closed, and its replacement started, off the caller's path: the
        # slot passes to the replacement (a run that needs a worker meanwhile waits for it).
        threading.Thread(
            target=self._replace, args=(worker,), name="gemgym-pool-replace", daemon=True
        ).start()

    def _replace(self, worker: ServerProcess) -> None:
        worker.close()
        fresh = None
        if not self._closed:
            try:
                fresh = self.launcher.start(self.limits)
            except Exception:
                fresh = None  # the next run starts one itself, and reports why if it cannot
        if fresh is not None:
            self._release(fresh, True)  # closes it if the pool was closed meanwhile
            return
        with self._cv:
            self._started -= 1
            self._cv.notify()

    def warm_up(self) -> None:
        """Start now every worker not started yet, rather than on first use.

        Idempotent and safe from several threads at once: each worker is started once, and a
        busy worker is never waited for. A closed sandbox starts nothing.

        Raises:
            SandboxError: a worker could not start (the cause is in the message).
        """
        self._check_fork()
        with self._cv:
            missing = 0 if self._closed else self.size - self._started
            self._started += missing
        started: list[ServerProcess] = []
        try:
            for _ in range(missing):
                started.append(self.launcher.start(self.limits))
        finally:
            with self._cv:
                self._started -= missing - len(started)
                self._cv.notify_all()
            for w in started:
                self._release(w, True)  # closes it if the sandbox was closed meanwhile

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        self._check_fork()
        result = run_with_retries(self._acquire, self._release, self.launcher, request, limits)
        if result.notes:
            self.retired += 1
        return result

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
