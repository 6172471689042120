"""The ``sync`` backend: the envs are stepped in a loop, in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from gemgym.vector._group import EnvGroup, StepTuple, VecStep, arrays, build_all
from gemgym.vector.base import AutoresetMode, EnvRecipe, ResetItem, VectorEnv

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Step envs one after another: the fastest backend for cheap, CPU-bound envs.

    ``astep`` awaits every env's own ``astep`` concurrently, so envs that wait on I/O and
    implement ``astep`` overlap; envs that do not simply run their ``step``.

    A full step (one action per env) is :meth:`~gemgym.vector._group.EnvGroup.columns`, the
    hot path. The envs are built without :func:`gemgym.make`'s
    :class:`~gemgym.wrappers.OrderEnforcing` layer (the vector env keeps that order itself), so
    step and reset them through the vector env (:meth:`step`, :meth:`reset`, :meth:`handle`),
    not through ``venv.envs[i]``.
    """

    backend = "sync"

    def __init__(
        self, recipes: Sequence[EnvRecipe], *, autoreset_mode: AutoresetMode | str | None = None
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        self._group = EnvGroup(build_all(self.recipes), self.autoreset_mode)

    @property
    def envs(self) -> list[Any]:
        """The env objects (this process holds them)."""
        return list(self._group.envs)

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        if type(actions) is not list or len(actions) != self.num_envs or self._closed:
            return super().step(actions)  # partial steps, checks and errors
        return arrays(self._group.columns(actions), self.num_envs, self._false)

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        return self._group.reset(items)

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        return self._group.step(items)

    def _call_items(self, name: str, args: tuple[Any, ...], indices: list[int] | None) -> list[Any]:
        return self._group.call((name, args, indices))

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        reset = self._group.areset_one
        return list(await asyncio.gather(*(reset(i, s, o) for i, s, o in items)))

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        group = self._group
        group.check([i for i, _ in items])
        if len(items) == 1:
            i, a = items[0]
            return [await group.astep_one(i, a)]
        return list(await asyncio.gather(*(group.astep_one(i, a) for i, a in items)))

    def _close(self) -> None:
        self._group.close()
