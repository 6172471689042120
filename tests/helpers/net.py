"""Servers that tests and benchmarks start: free ports, waiting for a port, and
:func:`serve_process` (a server in a subprocess until its ``/health`` answers)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gemgym.errors import ConfigError

__all__ = [
    "ServedProcess",
    "free_port",
    "gemgym_server",
    "post_streamed",
    "rss_kib",
    "serve_process",
    "transformers_serve",
    "wait_for_port",
]


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


@dataclasses.dataclass
class ServedProcess:
    """A server :func:`gemgym_server` started: its port and process; ``out`` and ``err`` (its
    stdout and stderr) once it has stopped."""

    port: int
    proc: subprocess.Popen[str]
    out: str = ""
    err: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def gemgym_server(*args: str, what: str = "gemgym") -> Iterator[ServedProcess]:
    """``python -m gemgym ARGS --port PORT`` (``serve ...``, ``serve-retriever ...``) on a free
    loopback port while the block runs; yields it once the port accepts connections (stdout and
    stderr are text pipes). Stopped with Ctrl-C (SIGINT), its output then read."""
    port = free_port()
    src = str(Path(__file__).parents[2] / "src")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemgym", *args, "--port", str(port)],
        env={**os.environ, "PYTHONPATH": src},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    server = ServedProcess(port, proc)
    try:
        wait_for_port(port, process=proc, what=what)
        yield server
    finally:
        proc.send_signal(signal.SIGINT)
        server.out, server.err = proc.communicate(timeout=30)


def rss_kib(pid: int) -> int:
    """The resident memory of process ``pid`` in KiB (``VmRSS``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


def post_streamed(port: int, path: str, size: int, *, timeout_s: float = 60.0) -> str:
    """POST a JSON body of ``size`` bytes (``x`` repeated, sent 1 MiB at a time, never held
    whole) to 127.0.0.1:``port``; returns what the server sends until it closes."""
    chunk = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        s.sendall(f"{head}Content-Length: {size}\r\n\r\n".encode())
        for _ in range(size // len(chunk)):
            s.sendall(chunk)
        s.sendall(chunk[: size % len(chunk)])
        parts = []
        while piece := s.recv(65536):
            parts.append(piece)
    return b"".join(parts).decode("latin-1")


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
