"""The ``docker`` backend: one container per snippet, for machines with a Docker engine.

Each run is ``docker run --rm -i`` of a Python image with no network, a read-only root, a
size-capped ``/tmp`` tmpfs, ``--pids-limit``, ``--memory`` (swap included), one CPU, every
capability dropped, ``no-new-privileges`` and uid 65534; gemgym's fork-server is the container's
first process (PID 1) and runs the program, and hidden tests in a separate trusted process, with the
same rlimits and clean-up as the other backends. On timeout the container is killed by name. Starting a
container costs hundreds of milliseconds, so prefer the ``pool`` backend where bubblewrap works.
Only the Docker CLI is needed (``docker`` on ``PATH``); the image must be pulled beforehand.
"""

from __future__ import annotations

import functools
import secrets
import shutil
import subprocess

from gemgym.errors import SandboxError, SandboxUnavailableError
from gemgym.sandbox._host import CLEAN_ENV, NotStarted, ServerProcess, WorkerDied, server_command
from gemgym.sandbox.base import (
    Limits,
    RunRequest,
    RunResult,
    Sandbox,
    failed_result,
    result_from_response,
)

__all__ = ["DockerSandbox", "docker_argv", "docker_available"]

DEFAULT_IMAGE = "python:3.11-slim"


@functools.cache
def docker_available(docker: str = "docker") -> bool:
    """Whether a Docker CLI is installed and its engine answers."""
    exe = shutil.which(docker)
    if exe is None:
        return False
    try:
        done = subprocess.run(
            [exe, "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def docker_argv(limits: Limits, image: str, name: str, docker: str = "docker") -> list[str]:
    """The ``docker run`` command line (without the program) for one snippet."""
    args = [docker, "run", "--rm", "-i", "--name", name]
    args += ["--network", "none", "--read-only", "--cap-drop", "ALL"]
    args += ["--security-opt", "no-new-privileges", "--user", "65534:65534"]
    args += ["--tmpfs", f"/tmp:rw,exec,nosuid,size={int(limits.tmp_size)}"]
    args += ["--workdir", "/tmp", "--pids-limit", str(int(limits.max_processes))]
    args += ["--memory", str(int(limits.memory)), "--memory-swap", str(int(limits.memory))]
    args += ["--cpus", "1"]
    for key, value in CLEAN_ENV.items():
        args += ["--env", f"{key}={value}"]
    return [*args, image]


class DockerSandbox(Sandbox):
    """One Docker container per snippet (see the module docstring).

    Args:
        limits: the default :class:`Limits` of every run.
        parallelism: runs at once in :meth:`run_many`.
        image: a local image with ``python3`` on its ``PATH``.
        docker: the Docker CLI to call.

    Raises:
        SandboxUnavailableError: no Docker CLI, or its engine does not answer.
    """

    name = "docker"

    def __init__(
        self,
        limits: Limits | None = None,
        parallelism: int = 2,
        image: str = DEFAULT_IMAGE,
        docker: str = "docker",
    ) -> None:
        super().__init__(limits, parallelism)
        if not docker_available(docker):
            raise SandboxUnavailableError(
                f"the docker sandbox needs a running Docker engine ({docker!r} info failed); "
                "start Docker, or install bubblewrap (apt-get install bubblewrap) and use the "
                "default backend"
            )
        self.image = image
        self.docker = docker
        self._args = (self.limits, parallelism, image, docker)

    def command(self, limits: Limits, name: str) -> list[str]:
        """The full command of one run (``docker run ... python3 -I -c <runner>``)."""
        return docker_argv(limits, self.image, name, self.docker) + server_command("python3")

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        name = f"gemgym-{secrets.token_hex(6)}"

        def remove() -> None:
            subprocess.run([self.docker, "kill", name], capture_output=True, timeout=30)

        try:
            worker = ServerProcess(
                lambda _fds: self.command(limits, name), on_close=remove, start_timeout=120
            )
        except SandboxError as e:
            return failed_result(str(e))
        try:
            response = worker.request(request.spec(limits, None), limits.timeout + 10)
        except (NotStarted, WorkerDied) as e:
            return failed_result(str(e))
        finally:
            worker.close()
        return result_from_response(response, memory_scope="sandbox")
