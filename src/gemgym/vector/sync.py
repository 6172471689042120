"""The ``sync`` backend: the envs are stepped in a loop, in this process."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from typing import Any

import numpy as np

from gemgym.vector.base import (
    BOOL,
    FLOAT,
    AutoresetMode,
    EnvRecipe,
    EnvSlot,
    ResetItem,
    SlotBatch,
    StepTuple,
    VecStep,
    VectorEnv,
)

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Step envs one after another: the fastest backend for cheap, CPU-bound envs.

    ``astep`` awaits every env's own ``astep`` concurrently, so envs that wait on I/O and
    implement ``astep`` overlap; envs that do not simply run their ``step``.

    A full step (one action per env) is the hot path of
    :class:`~gemgym.vector.base.SlotBatch`: in the default SAME_STEP mode it skips the
    :class:`~gemgym.wrappers.OrderEnforcing` layer that :func:`gemgym.make` puts on each env
    once every env has been reset, as the vector env resets ended envs itself. Stepping or
    resetting ``venv.envs[i]`` directly, outside the vector env, is not tracked; use
    :meth:`handle` or :meth:`call`.
    """

    backend = "sync"

    def __init__(
        self, recipes: Sequence[EnvRecipe], *, autoreset_mode: AutoresetMode | str | None = None
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        self.slots = [EnvSlot(r.build(), self.autoreset_mode) for r in self.recipes]
        self._batch = SlotBatch(self.slots, self.autoreset_mode)

    @property
    def envs(self) -> list[Any]:
        """The env objects (this process holds them)."""
        return [s.env for s in self.slots]

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        slots = self.slots
        return [slots[i].reset(seed, opts) for i, seed, opts in items]

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        slots = self.slots
        try:
            return [slots[i].step(a) for i, a in items]
        except BaseException:
            self._batch.forget()  # an env may be left ended
            raise

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        n = self.num_envs
        if type(actions) is not list or len(actions) != n or self._closed:
            return super().step(actions)  # partial steps, checks and errors
        # SlotBatch.columns, inlined: the arrays are built from the columns directly, and only
        # when an episode ended do the flags and the ended envs go through Python
        batch = self._batch
        obs, rewards, terminated, truncated, infos = zip(*batch.run(actions), strict=True)
        rew = np.fromiter(rewards, FLOAT, n)
        false = self._false
        if True in terminated:
            term = np.fromiter(terminated, BOOL, n)
            if True in truncated:
                trunc = np.fromiter(truncated, BOOL, n)
                ended: Iterable[int] = compress(range(n), map(operator.or_, terminated, truncated))
            else:
                trunc = false.copy()
                ended = compress(range(n), terminated)
        elif True in truncated:
            term = false.copy()
            trunc = np.fromiter(truncated, BOOL, n)
            ended = compress(range(n), truncated)
        else:
            return list(obs), rew, false.copy(), false.copy(), list(infos)
        obs_l, infos_l = list(obs), list(infos)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            batch.autoreset(ended, obs, infos, obs_l, infos_l)
        return obs_l, rew, term, trunc, infos_l

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        self._batch.forget()  # the call may step or reset the envs
        return [s.call(name, args) for s in self.slots]

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        slots = self.slots
        return list(await asyncio.gather(*(slots[i].areset(s, o) for i, s, o in items)))

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        slots = self.slots
        try:
            if len(items) == 1:
                i, a = items[0]
                return [await slots[i].astep(a)]
            return list(await asyncio.gather(*(slots[i].astep(a) for i, a in items)))
        except BaseException:
            self._batch.forget()
            raise

    def _close(self) -> None:
        for s in self.slots:
            s.env.close()
