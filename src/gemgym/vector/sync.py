"""The ``sync`` backend: the envs are stepped in a loop, in this process."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gemgym.vector.base import (
    AutoresetMode,
    EnvRecipe,
    EnvSlot,
    ResetItem,
    StepTuple,
    VecStep,
    VectorEnv,
    final_info,
    stack,
    step_all,
)

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Step envs one after another: the fastest backend for cheap, CPU-bound envs.

    ``astep`` awaits every env's own ``astep`` concurrently, so envs that wait on I/O and
    implement ``astep`` overlap; envs that do not simply run their ``step``.
    """

    backend = "sync"

    def __init__(
        self, recipes: Sequence[EnvRecipe], *, autoreset_mode: AutoresetMode | str | None = None
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        self.slots = [EnvSlot(r.build(), self.autoreset_mode) for r in self.recipes]
        self._steps: list[Any] | None = None  # bound env.step methods, made on first use
        self._resets: list[Any] = []  # and bound env.reset methods

    @property
    def envs(self) -> list[Any]:
        """The env objects (this process holds them)."""
        return [s.env for s in self.slots]

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        slots = self.slots
        return [slots[i].reset(seed, opts) for i, seed, opts in items]

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        slots = self.slots
        return [slots[i].step(a) for i, a in items]

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        n = self.num_envs
        if type(actions) is not list or len(actions) != n or self._closed:
            return super().step(actions)  # partial steps, checks and errors
        slots = self.slots
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            return stack(step_all(slots, actions))
        # SAME_STEP and DISABLED, the hot path: the envs' bound step methods are called from C
        # (map + operator.call) and the columns are built once; only ended envs go through Python
        steps = self._steps
        if steps is None:
            steps = self._steps = [s.env.step for s in slots]
            self._resets = [s.env.reset for s in slots]
        obs, rewards, terminated, truncated, infos = zip(
            *map(operator.call, steps, actions), strict=True
        )
        if True not in terminated and True not in truncated:
            return (
                list(obs),
                np.fromiter(rewards, np.float64, n),
                np.zeros(n, dtype=bool),
                np.zeros(n, dtype=bool),
                list(infos),
            )
        term = np.fromiter(terminated, bool, n)
        trunc = np.fromiter(truncated, bool, n)
        obs_l, infos_l = list(obs), list(infos)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            resets = self._resets
            for i in (term | trunc).nonzero()[0].tolist():
                obs_l[i], reset_info = resets[i]()
                infos_l[i] = final_info(reset_info, obs[i], infos[i])
        return obs_l, np.fromiter(rewards, np.float64, n), term, trunc, infos_l

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        return [s.call(name, args) for s in self.slots]

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        slots = self.slots
        return list(await asyncio.gather(*(slots[i].areset(s, o) for i, s, o in items)))

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        slots = self.slots
        if len(items) == 1:
            i, a = items[0]
            return [await slots[i].astep(a)]
        return list(await asyncio.gather(*(slots[i].astep(a) for i, a in items)))

    def _close(self) -> None:
        for s in self.slots:
            s.env.close()
