"""Synthetic envs for benchmarks and tests of the vector backends.

Importing this module registers two ids (they are not built-in games: nothing imports this module
unless you do):

============================  ======================================================================
``bench:CpuBound-v0``         every step does a fixed amount of pure-Python arithmetic
                              (``work_iters=1200`` loop iterations, about 200 µs on one core of the
                              reference machine; ``benchmarks/vector.py`` prints the measured cost)
``bench:Sleep-v0``            every step waits ``sleep_s=0.02`` s (``time.sleep`` in ``step``,
                              ``asyncio.sleep`` in ``astep``): an env bound by I/O
============================  ======================================================================

Both: observation ``"start v"`` on reset (``options={"start": v}`` sets ``v``) and ``"step t: v"``
after a step (``v`` from the env's own random stream, so seeding shows), any action, reward in
[0, 1) from the same stream, ``terminated`` after ``episode_length`` steps.

:class:`FaultyEnv` (not registered; build it with ``env_fns=[functools.partial(FaultyEnv)]``)
misbehaves on purpose, for crash-isolation tests: the action ``"crash"`` kills its process,
``"hang"`` blocks for an hour, ``"raise"`` raises :class:`ValueError`, ``"big:N"`` answers with
an observation of ``N`` bytes.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from gemgym.core import Env
from gemgym.errors import ConfigError
from gemgym.registry import register, registry

__all__ = ["CpuBoundEnv", "FaultyEnv", "SleepEnv", "cpu_work"]


def cpu_work(iters: int, seed: int) -> int:
    """A fixed amount of pure-Python work (a linear congruential generator)."""
    acc = seed
    for _ in range(iters):
        acc = (acc * 1103515245 + 12345) & 0x7FFFFFFF
    return acc


class _CountingEnv(Env[str, str]):
    """An episode of ``episode_length`` steps with seeded observations and rewards."""

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


class CpuBoundEnv(_CountingEnv):
    """Each step does ``work_iters`` iterations of pure-Python arithmetic (see the module doc)."""

    def __init__(self, episode_length: int = 10, work_iters: int = 1200) -> None:
        super().__init__(episode_length)
        self.work_iters = work_iters

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        cpu_work(self.work_iters, self.t)
        return self._advance()


class SleepEnv(_CountingEnv):
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


class FaultyEnv(_CountingEnv):
    """Misbehaves on request: ``"crash"`` exits the process, ``"hang"`` blocks, ``"raise"`` raises,
    ``"big:N"`` returns an observation of ``N`` bytes."""

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


for _id, _entry, _what in (
    ("bench:CpuBound-v0", "CpuBoundEnv", "about 200 µs of pure-Python work per step"),
    ("bench:Sleep-v0", "SleepEnv", "sleeps 20 ms per step (an I/O-bound env)"),
):
    if _id not in registry._specs:  # importing twice (e.g. in a worker) is fine
        register(_id, f"gemgym.vector.synthetic:{_entry}", description=f"Synthetic: {_what}")
