"""The ``thread`` backend: each env steps in a thread of a pool (for envs that wait on I/O)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gemgym.vector.base import AutoresetMode, EnvRecipe, EnvSlot, ResetItem, StepTuple, VectorEnv

__all__ = ["ThreadVectorEnv"]


class ThreadVectorEnv(VectorEnv):
    """Step every env in its own thread of a pool.

    Use it for envs that wait on I/O (tool calls, servers, sandboxes): while one env waits, the
    others run. For pure-Python CPU-bound envs it is slower than ``sync`` (the GIL serialises
    them); use ``process`` there. Every env has its own random generators, so results do not
    depend on thread scheduling.

    Args:
        recipes: one :class:`EnvRecipe` per env.
        autoreset_mode: see :class:`~gemgym.vector.AutoresetMode`.
        max_workers: threads in the pool (default: one per env, at most 512).
    """

    backend = "thread"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        autoreset_mode: AutoresetMode | str | None = None,
        max_workers: int | None = None,
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        workers = max_workers if max_workers is not None else min(self.num_envs, 512)
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="gemgym-vec")
        self.slots = list(self._pool.map(self._build, self.recipes))

    def _build(self, recipe: EnvRecipe) -> EnvSlot:
        return EnvSlot(recipe.build(), self.autoreset_mode)

    @property
    def envs(self) -> list[Any]:
        """The env objects (this process holds them)."""
        return [s.env for s in self.slots]

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        slots = self.slots
        futures = [self._pool.submit(slots[i].reset, s, o) for i, s, o in items]
        return [f.result() for f in futures]

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        slots = self.slots
        if len(items) == 1:
            i, a = items[0]
            return [slots[i].step(a)]
        futures = [self._pool.submit(slots[i].step, a) for i, a in items]
        return [f.result() for f in futures]

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        futures = [self._pool.submit(s.call, name, args) for s in self.slots]
        return [f.result() for f in futures]

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        slots = self.slots
        return list(
            await asyncio.gather(
                *(loop.run_in_executor(self._pool, slots[i].reset, s, o) for i, s, o in items)
            )
        )

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        loop = asyncio.get_running_loop()
        slots = self.slots
        return list(
            await asyncio.gather(
                *(loop.run_in_executor(self._pool, slots[i].step, a) for i, a in items)
            )
        )

    def _close(self) -> None:
        try:
            list(self._pool.map(lambda s: s.env.close(), self.slots))
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
