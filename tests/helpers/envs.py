"""Envs for tests and benchmarks: :class:`CountingEnv`, :class:`FaultyEnv` and the synthetic
``bench:*`` envs of the vector benchmarks.

:func:`register_bench_envs` registers (they are not built-in games: nothing registers them
unless a test or a benchmark asks):

============================  ======================================================================
``bench:CpuBound-v0``         every step does a fixed amount of pure-Python arithmetic
                              (``work_iters=1200`` loop iterations; ``benchmarks/vector.py`` prints
                              the measured cost; measured figures: docs/benchmarks.md)
``bench:Sleep-v0``            every step waits ``sleep_s=0.02`` s (``time.sleep`` in ``step``,
                              ``asyncio.sleep`` in ``astep``): an env bound by I/O
``bench:BlockingSleep-v0``    as ``bench:Sleep-v0`` in ``step``, with no async version
============================  ======================================================================

All are :class:`CountingEnv` episodes: observation ``"start v"`` on reset (``options={"start":
v}`` sets ``v``) and ``"step t: v"`` after a step (``v`` from the env's own random stream, so
seeding shows), any action, reward in [0, 1) from the same stream, ``terminated`` after
``episode_length`` steps.

Their entry points name this module (``helpers.envs:CpuBoundEnv``): a worker that builds one
imports it, so it needs ``tests/`` on its path (the ``process`` backend's workers inherit
``sys.path``; give Ray workers :func:`worker_pythonpath`).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from gemgym.core import Env
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = [
    "BENCH_IDS",
    "BlockingSleepEnv",
    "CountingEnv",
    "CpuBoundEnv",
    "FaultyEnv",
    "SleepEnv",
    "cpu_work",
    "register_bench_envs",
    "worker_pythonpath",
]

TESTS_DIR = Path(__file__).resolve().parents[1]


class CountingEnv(Env[str, str]):
    """An episode of ``episode_length`` steps with seeded observations and rewards; any action.

    Observation ``"start v"`` on reset (``options={"start": v}`` sets ``v``) and ``"step t: v"``
    after a step (``v`` from the env's own random stream, so seeding shows), reward in [0, 1) from
    the same stream, ``terminated`` after ``episode_length`` steps.
    """

    def __init__(self, episode_length: int = 10) -> None:
        if episode_length < 1:
            raise ConfigError(f"episode_length must be at least 1, got {episode_length}")
        self.episode_length = episode_length
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        first = self.rng.randrange(1000)
        if options and "start" in options:
            first = int(options["start"])
        return f"start {first}", {}

    def _advance(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.t += 1
        reward = self.rng.random()
        obs = f"step {self.t}: {self.rng.randrange(1000)}"
        return obs, reward, self.t >= self.episode_length, False, {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self._advance()

    def sample_random_action(self) -> str:
        return "any"  # every action is accepted; the episode's random stream is left alone


class FaultyEnv(CountingEnv):
    """A :class:`CountingEnv` that misbehaves on request, for crash-isolation tests.

    The action ``"crash"`` ends its process (``os._exit(3)``), ``"hang"`` blocks for an hour,
    ``"raise"`` raises :class:`ValueError`, ``"big:N"`` answers with an observation of ``N``
    bytes. Not registered; build it in a worker with ``env_fns=[functools.partial(FaultyEnv)]``.
    """

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action.startswith("big:"):
            obs, reward, terminated, truncated, info = self._advance()
            return "b" * int(action[4:]), reward, terminated, truncated, info
        if action == "crash":
            os._exit(3)
        if action == "hang":
            time.sleep(3600)
        if action == "raise":
            raise ValueError("FaultyEnv was asked to raise")
        return self._advance()


# -- the synthetic benchmark envs -----------------------------------------------------------------
def cpu_work(iters: int, seed: int) -> int:
    """A fixed amount of pure-Python work (a linear congruential generator)."""
    acc = seed
    for _ in range(iters):
        acc = (acc * 1103515245 + 12345) & 0x7FFFFFFF
    return acc


class CpuBoundEnv(CountingEnv):
    """Each step does ``work_iters`` iterations of pure-Python arithmetic (see the module doc)."""

    def __init__(self, episode_length: int = 10, work_iters: int = 1200) -> None:
        super().__init__(episode_length)
        self.work_iters = work_iters

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        cpu_work(self.work_iters, self.t)
        return self._advance()


class SleepEnv(CountingEnv):
    """Each step waits ``sleep_s`` seconds; ``astep`` waits without blocking the event loop."""

    def __init__(self, episode_length: int = 10, sleep_s: float = 0.02) -> None:
        super().__init__(episode_length)
        self.sleep_s = sleep_s

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        time.sleep(self.sleep_s)
        return self._advance()

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        await asyncio.sleep(self.sleep_s)
        return self._advance()


class BlockingSleepEnv(SleepEnv):
    """Each step waits ``sleep_s`` seconds in ``step`` and has no async version: a sync env
    that blocks (a sandbox, a remote call), declared with ``blocking_io``."""

    blocking_io = True

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.step(action)


BENCH_IDS: dict[str, tuple[str, str]] = {
    "bench:CpuBound-v0": ("CpuBoundEnv", "about 200 µs of pure-Python work per step"),
    "bench:Sleep-v0": ("SleepEnv", "sleeps 20 ms per step (an I/O-bound env)"),
    "bench:BlockingSleep-v0": ("BlockingSleepEnv", "sleeps 20 ms per step, sync only"),
}
"""The synthetic ids: ``id -> (class name in this module, description)``."""


def register_bench_envs() -> list[str]:
    """Register the ``bench:*`` ids (again is fine: the same specs replace themselves);
    returns them."""
    for env_id, (cls, what) in BENCH_IDS.items():
        register(env_id, f"{__name__}:{cls}", description=f"Synthetic: {what}", override=True)
    return list(BENCH_IDS)


def worker_pythonpath() -> dict[str, str]:
    """Environment variables that let a worker process (a Ray actor) import ``helpers``:
    ``PYTHONPATH`` with ``tests/`` added. Pass as ``runtime_env={"env_vars": ...}``."""
    paths = [str(TESTS_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
