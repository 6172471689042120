"""What the serving benchmarks share: the servers they start (in their own processes), an echo
env for each server, and the client (OpenEnv's own async ``GenericEnvClient``, many sessions on
one event loop).

``python benchmarks/_serve_common.py gemgym-echo PORT`` / ``openenv-echo PORT`` start the echo
servers (the benchmarks do this themselves).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")


# -- servers -----------------------------------------------------------------------------------------
def serve_gemgym_echo(port: int) -> None:
    """``gemgym serve`` of an echo env equivalent to OpenEnv's example env (the reply echoed,
    reward 0.1 per character, never done)."""
    import gemgym
    from gemgym.serving import Limits
    from gemgym.serving.env_server import serve_env

    class EchoEnv(gemgym.Env[str, str]):
        """Echoes the reply (OpenEnv's example env, as a gemgym env)."""

        def __init__(self) -> None:
            self.steps = 0

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            self.steps = 0
            return "Echo environment ready!", {}

        def step(self, action: str) -> Any:
            self.steps += 1
            info = {"original_message": action, "step": self.steps}
            return action, len(action) * 0.1, False, False, info

    gemgym.register("bench:Echo-v0", EchoEnv, order_enforce=False, override=True)
    serve_env(
        "bench:Echo-v0",
        port=port,
        max_sessions=256,
        limits=Limits(max_connections=4096),
        on_ready=lambda url: print(f"serving on {url}", flush=True),
    )


def serve_openenv_echo(port: int) -> None:
    """OpenEnv's own server (``create_app``) hosting OpenEnv's example env: the echo env its
    ``openenv init`` template writes, rendered from openenv-core's own template files."""
    import openenv.cli
    import uvicorn
    from openenv.core.env_server import create_app

    template = Path(openenv.cli.__file__).parent / "templates" / "openenv_env"

    def render(path: Path) -> str:
        text = path.read_text()
        for key, value in (
            ("__ENV_CLASS_NAME__", "Echo"),
            ("__ENV_TITLE_NAME__", "Echo"),
            ("__ENV_NAME__", "echo"),
        ):
            text = text.replace(key, value)
        return text

    models = types.ModuleType("models")
    exec(compile(render(template / "models.py"), "models.py", "exec"), models.__dict__)
    sys.modules["models"] = models
    server = types.ModuleType("echo_environment")
    source = render(template / "server" / "__ENV_NAME___environment.py")
    exec(compile(source, "echo_environment.py", "exec"), server.__dict__)
    app = create_app(
        server.EchoEnvironment, models.EchoAction, models.EchoObservation, max_concurrent_envs=256
    )
    print(f"serving on http://127.0.0.1:{port}", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextmanager
def server_process(kind: str, port: int, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """A server in its own process, until the block ends: ``gemgym-echo``, ``openenv-echo``
    or ``gemgym`` (``gemgym serve`` with ``extra`` arguments)."""
    from _testkit import wait_for_port

    if kind == "gemgym":
        cmd = [sys.executable, "-m", "gemgym", "serve", *extra, "--port", str(port)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), kind, str(port)]
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process=proc, timeout_s=120, what=kind)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the client ---------------------------------------------------------------------------------------
@dataclass
class Load:
    """What a run of clients did: step latencies (s), errors and the wall time."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def steps_per_s(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000 if self.latencies else float("nan")


async def drive(
    url: str,
    clients: int,
    seconds: float,
    actions: list[str],
    *,
    episode_steps: int = 0,
    load: Load | None = None,
) -> Load:
    """``clients`` OpenEnv sessions on ``url`` (OpenEnv's own async GenericEnvClient), each
    resetting and stepping ``actions`` in turn for ``seconds``; a new episode when the server
    says done (or every ``episode_steps`` steps when > 0)."""
    from openenv.core.generic_client import GenericEnvClient

    load = load or Load()
    stop = time.perf_counter() + seconds

    async def one(k: int) -> None:
        client = GenericEnvClient(base_url=url, message_timeout_s=60)
        try:
            await client.connect()
            result = await client.reset(seed=k)
            i = k
            steps = 0
            while time.perf_counter() < stop:
                if result.done or (episode_steps and steps >= episode_steps):
                    result = await client.reset(seed=i)
                    steps = 0
                t0 = time.perf_counter()
                result = await client.step({"message": actions[i % len(actions)]})
                load.latencies.append(time.perf_counter() - t0)
                i += 1
                steps += 1
        except Exception as e:
            load.errors.append(f"client {k}: {type(e).__name__}: {e}")
        finally:
            try:
                await client.disconnect()
            except Exception as e:
                load.errors.append(f"client {k} close: {type(e).__name__}: {e}")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(clients)))
    load.seconds += time.perf_counter() - t0
    return load


if __name__ == "__main__":
    {"gemgym-echo": serve_gemgym_echo, "openenv-echo": serve_openenv_echo}[sys.argv[1]](
        int(sys.argv[2])
    )
