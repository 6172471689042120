"""Synthetic envs for benchmarks and tests of the vector backends.

Importing this module registers two ids (they are not built-in games: nothing imports this module
unless you do):

============================  ======================================================================
``bench:CpuBound-v0``         every step does a fixed amount of pure-Python arithmetic
                              (``work_iters=1200`` loop iterations; ``benchmarks/vector.py`` prints
                              the measured cost; measured figures: docs/benchmarks.md)
``bench:Sleep-v0``            every step waits ``sleep_s=0.02`` s (``time.sleep`` in ``step``,
                              ``asyncio.sleep`` in ``astep``): an env bound by I/O
============================  ======================================================================

Both are :class:`gemgym.testing.CountingEnv` episodes: observation ``"start v"`` on reset
(``options={"start": v}`` sets ``v``) and ``"step t: v"`` after a step (``v`` from the env's own
random stream, so seeding shows), any action, reward in [0, 1) from the same stream,
``terminated`` after ``episode_length`` steps. (``FaultyEnv``, which crashes, hangs or raises on
request, is test scaffolding: it lives in :mod:`gemgym.testing`.)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gemgym.registry import register, registry
from gemgym.testing import CountingEnv

__all__ = ["BlockingSleepEnv", "CpuBoundEnv", "SleepEnv", "cpu_work"]


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


for _id, _entry, _what in (
    ("bench:CpuBound-v0", "CpuBoundEnv", "about 200 µs of pure-Python work per step"),
    ("bench:Sleep-v0", "SleepEnv", "sleeps 20 ms per step (an I/O-bound env)"),
    ("bench:BlockingSleep-v0", "BlockingSleepEnv", "sleeps 20 ms per step, sync only"),
):
    if _id not in registry._specs:  # importing twice (e.g. in a worker) is fine
        register(_id, f"gemgym.vector.synthetic:{_entry}", description=f"Synthetic: {_what}")
