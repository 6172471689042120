"""Servers that tests and benchmarks start: free ports, waiting for a port, and
:func:`serve_process` (a server in a subprocess until its ``/health`` answers)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError

__all__ = ["free_port", "serve_process", "transformers_serve", "wait_for_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(
    port: int, *, process: Any = None, timeout_s: float = 60.0, what: str = "the server"
) -> None:
    """Return once 127.0.0.1:``port`` accepts connections.

    Raises :class:`~gemgym.errors.ConfigError` when ``process`` (a ``subprocess.Popen``) exits
    first or ``timeout_s`` seconds pass; ``what`` names the server in the message.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process is not None and process.poll() is not None:
                raise ConfigError(f"{what} exited with {process.returncode}") from None
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"{what} did not listen on port {port} in {timeout_s:g} s"
                ) from None
            time.sleep(0.05)


@contextlib.contextmanager
def serve_process(
    command: Callable[[int], list[str]],
    *,
    timeout_s: float = 120.0,
    log: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """Run the server ``command(port)`` starts on a free loopback port while the block runs;
    yields its URL (``http://127.0.0.1:PORT``) once ``/health`` answers.

    ``log``: a file for the server's output (default: discarded); ``env``: more environment
    variables (``HF_HUB_OFFLINE=1`` is always set). Raises :class:`~gemgym.errors.ConfigError`
    when the server exits or does not answer within ``timeout_s`` seconds.
    """
    port = free_port()
    with open(log or os.devnull, "wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            command(port),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    from gemgym._http import SyncClient, TransportError

    health = SyncClient(url, timeout=1.0, extra="llm-server")
    try:
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    if 200 <= health.get("/health").status < 300:
                        break
                except TransportError:
                    pass
                if proc.poll() is not None:
                    raise ConfigError(f"the server exited with {proc.returncode}")
                if time.monotonic() > deadline:
                    raise ConfigError(f"the server did not start in {timeout_s:g} s")
                time.sleep(0.5)
        finally:
            health.close()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def transformers_serve(
    model: str | Path, *, timeout_s: float = 120.0
) -> contextlib.AbstractContextManager[str]:
    """``transformers serve MODEL`` (an OpenAI-compatible server, ``transformers[serving]``) on
    a free loopback port, as :func:`serve_process`; raises
    :class:`~gemgym.errors.ConfigError` when the ``transformers`` command is missing."""
    exe = Path(sys.executable).with_name("transformers")
    if not exe.is_file():
        raise ConfigError(f"no transformers command beside {sys.executable}")
    return serve_process(
        lambda port: [str(exe), "serve", str(model), "--host", "127.0.0.1", "--port", str(port)],
        timeout_s=timeout_s,
    )
