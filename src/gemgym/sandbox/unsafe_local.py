"""The ``unsafe-local`` backend: rlimits only, NO isolation.

For machines with neither bubblewrap nor Docker, and only for code you would run yourself. The
snippet runs as a plain subprocess of this user, in a fresh temporary directory (deleted after),
with a cleared environment, ``python -I``, the CPU/memory/file-size rlimits, a wall timeout that
kills its process group, and an output cap. It **can read and write your files, use the
network, and start processes that leave its process group** (``RLIMIT_NPROC`` caps processes
only for non-root users). Choosing it is always explicit: ``make_sandbox("unsafe-local")``; it
is never picked automatically, and constructing it emits :class:`UnsafeSandboxWarning`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings

from gemgym.sandbox._host import (
    NotStarted,
    ServerProcess,
    WorkerDied,
    server_command,
    user_process_count,
)
from gemgym.sandbox.base import (
    Limits,
    RunRequest,
    RunResult,
    Sandbox,
    failed_result,
    result_from_response,
)

__all__ = ["UnsafeLocalSandbox", "UnsafeSandboxWarning"]


class UnsafeSandboxWarning(UserWarning):
    """Code is about to run without filesystem, network or process isolation."""


class UnsafeLocalSandbox(Sandbox):
    """Run snippets as local subprocesses with rlimits only (see the module docstring).

    Args:
        limits: the default :class:`Limits` of every run.
        parallelism: runs at once in :meth:`run_many`.
        python: the interpreter (default: this one; ``"system"``: the system's ``python3``).
    """

    name = "unsafe-local"
    isolating = False

    def __init__(
        self, limits: Limits | None = None, parallelism: int = 2, python: str | None = None
    ) -> None:
        super().__init__(limits, parallelism)
        if python == "system":
            from gemgym.sandbox._host import system_python

            python = system_python() or "/usr/bin/python3"
        self.python = python or sys.executable
        self._args = (self.limits, parallelism, python)
        warnings.warn(
            "the 'unsafe-local' sandbox does NOT isolate files, network or processes: run only "
            "trusted code with it, or install bubblewrap (apt-get install bubblewrap)",
            UnsafeSandboxWarning,
            stacklevel=2,
        )

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        workdir = tempfile.mkdtemp(prefix="gemgym-unsafe-")
        nproc = (
            None if os.geteuid() == 0 else user_process_count(os.getuid()) + limits.max_processes
        )
        try:
            worker = ServerProcess(
                lambda _fds: server_command(self.python, isolated=False), cwd=workdir
            )
            try:
                response = worker.request(request.spec(limits, nproc), limits.timeout + 10)
            except (NotStarted, WorkerDied) as e:
                return failed_result(str(e))
            finally:
                worker.close()
            return result_from_response(response)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
