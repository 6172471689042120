"""Run untrusted Python code safely: :func:`make_sandbox`, :func:`shared_sandbox`.

Backends (``backend=``):

==============  ================================================================================
``"pool"``      warm bubblewrap fork-servers, a few ms per snippet (the default)
``"bwrap"``     one bubblewrap sandbox per snippet (an interpreter start each time)
``"docker"``    one container per snippet, where a Docker engine runs
``"unsafe-local"``  rlimits only, **no isolation**; only when chosen explicitly
``"auto"``      ``pool`` if bubblewrap works here, else ``docker`` if an engine answers, else
                :class:`~gemgym.errors.SandboxUnavailableError` saying what to install
==============  ================================================================================

Every run has a wall timeout, CPU-time, memory, process-count, output and file-size limits
(:class:`Limits`), a cleared environment, and leaves no process or temporary file behind. Results
are typed (:class:`RunResult`: stdout, stderr, exit code, timed out, which limit killed it).

>>> from gemgym.sandbox import make_sandbox
>>> with make_sandbox() as sandbox:          # doctest: +SKIP
...     sandbox.run("print(1 + 1)").stdout
'2\\n'

The code is treated as hostile: as root it never runs as host uid 0 (each sandbox has a host
uid of its own), a seccomp filter and cgroups hold it, it sees no dataset file and not gemgym
itself, nothing it does survives its run or tells the next run how it went, and hidden tests
run in a separate trusted process it cannot reach. See ``docs/sandbox.md`` for the threat model, every measure and its
test, and ``docs/benchmarks.md`` for the measured costs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Literal

from gemgym.errors import ConfigError, SandboxUnavailableError
from gemgym.sandbox.base import KillReason, Limits, RunRequest, RunResult, Sandbox

__all__ = [
    "BACKENDS",
    "KillReason",
    "Limits",
    "RunRequest",
    "RunResult",
    "Sandbox",
    "SandboxBackend",
    "available_backends",
    "make_sandbox",
    "shared_sandbox",
]

SandboxBackend = Literal["auto", "pool", "bwrap", "docker", "unsafe-local"]
BACKENDS: tuple[str, ...] = ("auto", "pool", "bwrap", "docker", "unsafe-local")


def available_backends() -> list[str]:
    """The isolating backends that work on this machine (``unsafe-local`` always works)."""
    from gemgym.sandbox.bwrap import bwrap_available
    from gemgym.sandbox.docker import docker_available

    found = ["pool", "bwrap"] if bwrap_available() else []
    if docker_available():
        found.append("docker")
    return [*found, "unsafe-local"]


def make_sandbox(
    backend: SandboxBackend | str = "auto",
    *,
    limits: Limits | None = None,
    parallelism: int = 2,
    python: str | None = None,
    ro_paths: Sequence[str] = (),
    image: str | None = None,
) -> Sandbox:
    """Build a sandbox.

    Args:
        backend: one of :data:`BACKENDS` (see the module docstring).
        limits: default limits of every run.
        parallelism: runs at once (the pool's number of workers).
        python: interpreter run inside (bwrap, pool, unsafe-local): a path, ``None`` (this
            one) or ``"system"`` (the system's ``python3``, without this venv's packages).
        ro_paths: extra host directories visible read-only inside (bwrap, pool).
        image: the Docker image (docker).

    Raises:
        SandboxUnavailableError: no isolating backend works here (fail closed: ``unsafe-local``
            is never chosen for you), the sandbox's uid cannot run ``python``, or
            ``limits.memory`` cannot hold as ``limits.memory_scope`` asks; the message says
            what to do.
        ConfigError: an unknown backend.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    if backend == "auto":
        from gemgym.sandbox.bwrap import INSTALL_HINT, bwrap_available
        from gemgym.sandbox.docker import docker_available

        if bwrap_available():
            backend = "pool"
        elif docker_available():
            backend = "docker"
        else:
            raise SandboxUnavailableError(
                f"no isolating code sandbox works on this machine: {INSTALL_HINT}"
            )
    if backend == "pool":
        from gemgym.sandbox.pool import PoolSandbox

        return PoolSandbox(limits, parallelism, python, ro_paths)
    if backend == "bwrap":
        from gemgym.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(limits, parallelism, python, ro_paths)
    if backend == "docker":
        from gemgym.sandbox.docker import DEFAULT_IMAGE, DockerSandbox

        return DockerSandbox(limits, parallelism, image or DEFAULT_IMAGE)
    from gemgym.sandbox.unsafe_local import UnsafeLocalSandbox

    return UnsafeLocalSandbox(limits, parallelism, python)


_SHARED: dict[tuple[object, ...], Sandbox] = {}
_SHARED_LOCK = threading.Lock()


def shared_sandbox(
    backend: SandboxBackend | str = "auto", *, limits: Limits | None = None, parallelism: int = 2
) -> Sandbox:
    """A process-wide sandbox for these settings, made on first use and reused.

    Sandboxes keep no state between runs, so envs and tools share one pool instead of each
    starting its own workers (a forked child process gets its own). Do not ``close()`` it.
    """
    key = (os.getpid(), backend, limits, parallelism)
    with _SHARED_LOCK:
        sandbox = _SHARED.get(key)
        if sandbox is None or sandbox.closed:
            sandbox = make_sandbox(backend, limits=limits, parallelism=parallelism)
            _SHARED[key] = sandbox
        return sandbox


def __getattr__(name: str) -> Any:
    if name == "Backend":  # the name until 0.2; deprecated
        from gemgym._lazy import deprecated_alias

        deprecated_alias(__name__, "Backend", "SandboxBackend")
        return SandboxBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
