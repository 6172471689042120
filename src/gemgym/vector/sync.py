"""The ``sync`` backend: the envs are stepped in a loop, in this process."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
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
    stack,
    step_all,
)
from gemgym.wrappers.common import OrderEnforcing

__all__ = ["SyncVectorEnv"]

_FLOAT = np.dtype(np.float64)
_BOOL = np.dtype(bool)


class SyncVectorEnv(VectorEnv):
    """Step envs one after another: the fastest backend for cheap, CPU-bound envs.

    ``astep`` awaits every env's own ``astep`` concurrently, so envs that wait on I/O and
    implement ``astep`` overlap; envs that do not simply run their ``step``.

    In the default ``SAME_STEP`` mode a full step calls each env's step from C and skips the
    :class:`~gemgym.wrappers.OrderEnforcing` layer that :func:`gemgym.make` puts on top of an env
    once every env has been reset: the vector env itself resets each ended env before the step
    returns, so that layer's check can never fire there. Stepping or resetting ``venv.envs[i]``
    directly, outside the vector env, is not tracked; use :meth:`handle` or :meth:`call`.
    """

    backend = "sync"

    def __init__(
        self, recipes: Sequence[EnvRecipe], *, autoreset_mode: AutoresetMode | str | None = None
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        self.slots = [EnvSlot(r.build(), self.autoreset_mode) for r in self.recipes]
        # the hot path's bound step and reset methods (made on first use, the steps dropped
        # after any error) and an all-False flag column to copy
        self._steps: list[Any] | None = None
        self._resets: list[Any] = []
        self._false = np.zeros(self.num_envs, dtype=bool)

    @property
    def envs(self) -> list[Any]:
        """The env objects (this process holds them)."""
        return [s.env for s in self.slots]

    def _hot_steps(self) -> list[Any]:
        """The step methods of the hot path (and their resets, in ``_resets``). In SAME_STEP
        mode, once every env has been reset, those below an outermost OrderEnforcing: that layer
        then never sees an episode end, so it stays ready, as it would through the resets."""
        envs = [s.env for s in self.slots]
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        ready = same_step and all(e.has_reset for e in envs if type(e) is OrderEnforcing)
        if ready:
            envs = [e.env if type(e) is OrderEnforcing else e for e in envs]
        steps = [e.step for e in envs]
        self._resets = [e.reset for e in envs]
        # cached, except while the layer of an env never reset must raise ResetNeeded
        self._steps = steps if ready or not same_step else None
        return steps

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        slots = self.slots
        return [slots[i].reset(seed, opts) for i, seed, opts in items]

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        slots = self.slots
        try:
            return [slots[i].step(a) for i, a in items]
        except BaseException:
            self._steps = None  # an env may be left ended: look again before skipping a layer
            raise

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        n = self.num_envs
        if type(actions) is not list or len(actions) != n or self._closed:
            return super().step(actions)  # partial steps, checks and errors
        mode = self.autoreset_mode
        if mode is AutoresetMode.NEXT_STEP:
            return stack(step_all(self.slots, actions))
        # SAME_STEP and DISABLED, the hot path: the envs' bound step methods are called from C
        # (map + operator.call) and the columns are built once; only ended envs go through Python
        done: list[StepTuple] = []
        try:
            done.extend(map(operator.call, self._steps or self._hot_steps(), actions))
        except BaseException:
            self._fail(done)
            raise
        obs, rewards, terminated, truncated, infos = zip(*done, strict=True)
        rew = np.fromiter(rewards, _FLOAT, n)
        if True in terminated:
            term = np.fromiter(terminated, _BOOL, n)
            if True in truncated:
                trunc = np.fromiter(truncated, _BOOL, n)
                ended: Iterable[int] = compress(range(n), map(operator.or_, terminated, truncated))
            else:
                trunc = self._false.copy()
                ended = compress(range(n), terminated)
        elif True in truncated:
            term = self._false.copy()
            trunc = np.fromiter(truncated, _BOOL, n)
            ended = compress(range(n), truncated)
        else:
            return list(obs), rew, self._false.copy(), self._false.copy(), list(infos)
        obs_l, infos_l = list(obs), list(infos)
        if mode is AutoresetMode.SAME_STEP:
            resets = self._resets
            for i in ended:
                try:
                    obs_l[i], reset_info = resets[i]()
                except BaseException:
                    self._reset_failed(i)
                    raise
                infos_l[i] = {**reset_info, "final_obs": obs[i], "final_info": infos[i]}
        return obs_l, rew, term, trunc, infos_l

    def _fail(self, done: list[StepTuple]) -> None:
        """An env raised in the hot path: in SAME_STEP mode, reset the ended envs stepped before
        it (as the other backends do); look again at the envs before skipping a layer."""
        self._steps = None
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            for i, result in enumerate(done):
                if result[2] or result[3]:
                    try:
                        self._resets[i]()
                    except Exception:  # the first env's error is the one raised
                        self._reset_failed(i)

    def _reset_failed(self, i: int) -> None:
        """Env ``i`` ended in the hot path and its reset raised: its order check, which did not
        see the end, must refuse the next step."""
        self._steps = None
        env = self.slots[i].env
        if type(env) is OrderEnforcing:
            env.require_reset()

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        self._steps = None  # the call may step or reset the envs
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
            self._steps = None
            raise

    def _close(self) -> None:
        for s in self.slots:
            s.env.close()
