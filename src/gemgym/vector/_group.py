"""The envs of one host and the autoreset rule: the one place where a vector env's envs are stepped
and reset.

Every backend keeps its envs in an :class:`EnvGroup`: the ``sync`` and ``thread`` backends one for
all their envs, each ``process`` worker and each Ray actor one for its block. The group applies the
autoreset mode next to the envs, so the rules, and the random streams, are the same in every
backend: the same seeds and actions give the same results.

The group also keeps the order of calls that :class:`~gemgym.wrappers.OrderEnforcing` keeps for a
single env: the vector env builds its envs without that layer (it resets every ended env itself,
so the layer's check could never fire on the vector env's own calls), and the group refuses to
step an env that must be reset first (:class:`~gemgym.errors.ResetNeeded`): one never reset, one
whose episode ended in ``DISABLED`` mode, one whose autoreset raised.
"""

from __future__ import annotations

import contextlib
import enum
import operator
from collections.abc import Iterable, Sequence
from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from gemgym.core import Env
from gemgym.errors import ConfigError, ResetNeeded, VectorEnvError

if TYPE_CHECKING:
    from gemgym.vector.base import EnvRecipe

__all__ = ["AutoresetMode", "Columns", "EnvGroup", "StepTuple", "VecStep", "arrays", "to_columns"]

FLOAT = np.dtype(np.float64)
BOOL = np.dtype(bool)
"""The dtypes of the reward and flag arrays (dtype objects: ``np.fromiter`` takes them fastest)."""

StepTuple = tuple[Any, float, bool, bool, dict[str, Any]]
"""One env's ``(observation, reward, terminated, truncated, info)``."""
VecStep = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
"""``(observations, rewards, terminated, truncated, infos)`` of a vector step."""
Columns = tuple[
    list[Any], Sequence[float], Sequence[bool], Sequence[bool], list[dict[str, Any]], bool, bool
]
"""A batch as columns: ``(observations, rewards, terminated, truncated, infos, any_terminated,
any_truncated)``, the first five with one entry per env (what :meth:`EnvGroup.columns` returns)."""

# Methods that step or reset an env: the vector env owns them, so ``venv.call`` refuses them.
_OWNED = frozenset({"step", "astep", "reset", "areset"})


class AutoresetMode(enum.StrEnum):
    """What happens to an env whose episode ended.

    * ``NEXT_STEP``: the next ``step`` resets it (its action is ignored; reward 0, flags false).
    * ``SAME_STEP`` (default): it is reset within the same ``step``; the returned observation and
      info are the reset ones, and the terminal ones are kept in ``info["final_obs"]`` and
      ``info["final_info"]``.
    * ``DISABLED``: nothing happens; stepping it raises :class:`~gemgym.errors.ResetNeeded` until
      ``reset(options={"reset_mask": mask})`` resets it.
    """

    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"

    @classmethod
    def coerce(cls, value: AutoresetMode | str | None) -> AutoresetMode:
        """Accept the enum, its value or name in any case (``"SameStep"`` too)."""
        if value is None:
            return cls.SAME_STEP
        if isinstance(value, cls):
            return value
        key = str(value).replace("-", "_").lower()
        aliases = {"nextstep": "next_step", "samestep": "same_step"}
        key = aliases.get(key, key)
        for mode in cls:
            if mode.value == key:
                return mode
        raise ConfigError(f"unknown autoreset_mode {value!r}; use one of {[m.value for m in cls]}")


def to_columns(results: Sequence[StepTuple]) -> Columns:
    """Per-env results (at least one) as a batch's :data:`Columns`."""
    obs, rewards, terminated, truncated, infos = zip(*results, strict=True)
    return (
        list(obs),
        rewards,
        terminated,
        truncated,
        list(infos),
        True in terminated,
        True in truncated,
    )


def arrays(columns: Columns, n: int, false: np.ndarray) -> VecStep:
    """The batched 5-tuple of ``n`` envs from their columns; a flag column with no true entry
    is a copy of ``false`` (an all-false array of ``n``), not read."""
    obs, rewards, terminated, truncated, infos, any_term, any_trunc = columns
    return (
        obs,
        np.fromiter(rewards, FLOAT, n),
        np.fromiter(terminated, BOOL, n) if any_term else false.copy(),
        np.fromiter(truncated, BOOL, n) if any_trunc else false.copy(),
        infos,
    )


def stack(results: Sequence[StepTuple]) -> VecStep:
    """The batched 5-tuple from per-env results (any number)."""
    if not results:
        no = np.zeros(0, dtype=BOOL)
        return [], np.zeros(0, dtype=FLOAT), no, no.copy(), []
    return arrays(to_columns(results), len(results), np.zeros(len(results), dtype=BOOL))


def check_call(name: str) -> None:
    """Refuse ``venv.call`` of a method that steps or resets the envs behind the vector env."""
    if name in _OWNED:
        raise VectorEnvError(
            f"venv.call({name!r}) would {name.lstrip('a')} the envs behind the vector env's "
            f"back; use venv.{name}(...) or venv.handle(i).{name}(...)"
        )


class EnvGroup:
    """Envs stepped and reset under one autoreset mode (see the module doc).

    ``envs[j]`` is env ``first + j`` of the vector env. Per-env calls (:meth:`step_one`,
    :meth:`reset_one` and their async versions) may run in several threads at once on different
    envs (the ``thread`` backend); :meth:`columns`, the full batch, is the hot path of the
    ``sync`` backend and of each ``process`` worker and Ray actor.

    Args:
        envs: the envs, built without an :class:`~gemgym.wrappers.OrderEnforcing` layer on top
            (see :meth:`~gemgym.vector.base.EnvRecipe.build`).
        mode: the autoreset mode.
        first: the vector index of ``envs[0]`` (for error messages).
        needs_reset: the envs were rebuilt after their host was lost in ``NEXT_STEP`` mode: the
            next step of each resets it. Otherwise every env must be reset before it is stepped.
        seeds: per env, the seed of its next reset that gives none (an env rebuilt after a loss).
    """

    __slots__ = (
        "autoreset_next",
        "envs",
        "first",
        "mode",
        "must_reset",
        "next_seeds",
        "resets",
        "steps",
    )

    def __init__(
        self,
        envs: Sequence[Env[Any, Any]],
        mode: AutoresetMode,
        *,
        first: int = 0,
        needs_reset: bool = False,
        seeds: Sequence[int | None] | None = None,
    ) -> None:
        self.envs = list(envs)
        self.mode = mode
        self.first = first
        self.steps = [e.step for e in self.envs]  # bound methods: the hot path calls them from C
        self.resets = [e.reset for e in self.envs]
        every = set(range(len(self.envs)))
        self.must_reset: set[int] = set() if needs_reset else every
        """Envs that :meth:`step_one` refuses until they are reset."""
        self.autoreset_next: set[int] = every if needs_reset else set()
        """Envs whose next step resets them instead (``NEXT_STEP`` mode)."""
        self.next_seeds = {j: s for j, s in enumerate(seeds or ()) if s is not None}

    @classmethod
    def build(
        cls,
        recipes: Sequence[EnvRecipe],
        mode: AutoresetMode,
        *,
        first: int = 0,
        needs_reset: bool = False,
        seeds: Sequence[int | None] | None = None,
    ) -> EnvGroup:
        """Build the envs of ``recipes`` here (in a worker process or an actor) into a group."""
        return cls(build_all(recipes), mode, first=first, needs_reset=needs_reset, seeds=seeds)

    # -- the order of calls ------------------------------------------------------------------------
    def check(self, indices: Iterable[int]) -> None:
        """Raise :class:`~gemgym.errors.ResetNeeded`, before any env is stepped, when one of
        ``indices`` must be reset first."""
        if self.must_reset:
            held = self.must_reset.intersection(indices)
            if held:
                raise ResetNeeded(
                    f"env {self.first + min(held)}: call reset() before step(); it was never "
                    "reset, its episode ended (autoreset_mode='disabled') or its autoreset raised"
                )

    def _held(self, j: int) -> bool:
        """Env ``j`` is held back: raise if it must be reset; True if its step resets it."""
        self.check((j,))
        return j in self.autoreset_next

    def _ready(self, j: int) -> None:
        self.must_reset.discard(j)
        self.autoreset_next.discard(j)

    def _seed(self, j: int, seed: int | None) -> int | None:
        derived = self.next_seeds.pop(j, None) if self.next_seeds else None
        return derived if seed is None else seed

    # -- resets ------------------------------------------------------------------------------------
    def reset_one(
        self, j: int, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset env ``j``."""
        try:
            obs, info = self.resets[j](seed=self._seed(j, seed), options=options)
        except BaseException:
            self.must_reset.add(j)
            raise
        self._ready(j)
        return obs, info

    async def areset_one(
        self, j: int, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        """Async :meth:`reset_one` (the env's ``areset``)."""
        try:
            obs, info = await self.envs[j].areset(seed=self._seed(j, seed), options=options)
        except BaseException:
            self.must_reset.add(j)
            raise
        self._ready(j)
        return obs, info

    def reset(
        self, items: Sequence[tuple[int, int | None, dict[str, Any] | None]]
    ) -> list[tuple[Any, dict[str, Any]]]:
        """Reset the envs of ``(j, seed, options)`` items, in order."""
        return [self.reset_one(j, seed, options) for j, seed, options in items]

    # -- steps -------------------------------------------------------------------------------------
    def _finish_all(
        self,
        ended: Iterable[int],
        done: Sequence[StepTuple] | dict[int, StepTuple],
        obs: list[Any] | dict[int, Any],
        infos: list[dict[str, Any]] | dict[int, dict[str, Any]],
    ) -> None:
        """Apply the autoreset mode to the ``ended`` envs, whose step results are in ``done``
        (by env). In ``SAME_STEP`` mode each is reset, and its reset observation and info, with
        the terminal ``final_obs`` and ``final_info``, are written into ``obs`` and ``infos``;
        every one is reset even when one raises (the first error is raised after)."""
        mode = self.mode
        if mode is not AutoresetMode.SAME_STEP:
            (self.autoreset_next if mode is AutoresetMode.NEXT_STEP else self.must_reset).update(
                ended
            )
            return
        resets = self.resets
        error: BaseException | None = None
        for j in ended:
            try:
                obs[j], info = resets[j]()
            except BaseException as e:
                self.must_reset.add(j)  # its episode ended and it was not reset
                error = error or e
                continue
            infos[j] = {**info, "final_obs": done[j][0], "final_info": done[j][4]}
        if error is not None:
            raise error

    def _finish(self, j: int, result: StepTuple) -> StepTuple:
        """:meth:`_finish_all` for one env's step ``result`` that ended its episode."""
        if self.mode is not AutoresetMode.SAME_STEP:
            self._finish_all((j,), (), {}, {})
            return result
        obs: dict[int, Any] = {}
        infos: dict[int, dict[str, Any]] = {}
        self._finish_all((j,), {j: result}, obs, infos)
        return obs[j], result[1], result[2], result[3], infos[j]

    def step_one(self, j: int, action: Any) -> StepTuple:
        """Step env ``j`` (autoreset applied)."""
        if (self.must_reset or self.autoreset_next) and self._held(j):
            return _instead(self.reset_one(j, None, None))
        result = self.steps[j](action)
        return self._finish(j, result) if result[2] or result[3] else result

    async def astep_one(self, j: int, action: Any) -> StepTuple:
        """Async :meth:`step_one` (the env's ``astep`` and ``areset``)."""
        if (self.must_reset or self.autoreset_next) and self._held(j):
            return _instead(await self.areset_one(j, None, None))
        result = await self.envs[j].astep(action)
        if not (result[2] or result[3]):
            return result
        if self.mode is not AutoresetMode.SAME_STEP:
            return self._finish(j, result)
        try:
            obs, info = await self.envs[j].areset()
        except BaseException:
            self.must_reset.add(j)  # its episode ended and it was not reset
            raise
        return obs, result[1], result[2], result[3], final_info(info, result)

    def step(self, items: Sequence[tuple[int, Any]]) -> list[StepTuple]:
        """Step the envs of ``(j, action)`` items, in order (a partial step)."""
        self.check([j for j, _ in items])
        return [self.step_one(j, action) for j, action in items]

    def columns(self, actions: Sequence[Any]) -> Columns:
        """Step every env with its action (one each, at least one env): the hot path.

        The envs' bound ``step`` methods are called from C (``map`` + ``operator.call``) and the
        results turned into columns once; only the envs whose episode ended go through Python.
        """
        if self.must_reset or self.autoreset_next:
            self.check(range(len(actions)))
            return to_columns([self.step_one(j, a) for j, a in enumerate(actions)])
        done: list[StepTuple] = []
        try:
            done.extend(map(operator.call, self.steps, actions))
        except BaseException:  # the envs stepped before it that ended are finished all the same
            ended = [j for j, r in enumerate(done) if r[2] or r[3]]
            with contextlib.suppress(Exception):  # the first env's error is the one raised
                self._finish_all(ended, done, [None] * len(done), [{}] * len(done))
            raise
        obs, rewards, terminated, truncated, infos = zip(*done, strict=True)
        obs_l, infos_l = list(obs), list(infos)
        any_term, any_trunc = True in terminated, True in truncated
        if any_term or any_trunc:
            ended_envs = compress(range(len(done)), map(operator.or_, terminated, truncated))
            self._finish_all(ended_envs, done, obs_l, infos_l)
        return obs_l, rewards, terminated, truncated, infos_l, any_term, any_trunc

    # -- the rest ----------------------------------------------------------------------------------
    def call(self, request: tuple[Any, ...]) -> list[Any]:
        """Call method ``name`` with ``args`` on every env, or on the envs of ``indices`` (local,
        in order): ``request = (name, args)`` or ``(name, args, indices)``."""
        name, args = request[0], request[1]
        indices = request[2] if len(request) > 2 else None
        check_call(name)
        envs = self.envs if indices is None else [self.envs[i] for i in indices]
        return [getattr(env, name)(*args) for env in envs]

    def close(self, _: object = None) -> None:
        """Close every env; the first error is raised after all were closed."""
        error: Exception | None = None
        for env in self.envs:
            try:
                env.close()
            except Exception as e:
                error = error or e
        if error is not None:
            raise error


def _instead(reset: tuple[Any, dict[str, Any]]) -> StepTuple:
    """The step of a ``NEXT_STEP`` env that was reset instead."""
    return reset[0], 0.0, False, False, reset[1]


def final_info(reset_info: dict[str, Any], result: StepTuple) -> dict[str, Any]:
    """The info of a ``SAME_STEP`` autoreset: the reset's info plus the terminal ``final_obs`` and
    ``final_info`` of the step ``result`` (:meth:`EnvGroup._finish_all` builds it inline)."""
    return {**reset_info, "final_obs": result[0], "final_info": result[4]}


def build_all(recipes: Sequence[EnvRecipe]) -> list[Env[Any, Any]]:
    """Build the envs of ``recipes``; those built are closed when a later one fails."""
    envs: list[Env[Any, Any]] = []
    try:
        for recipe in recipes:
            envs.append(recipe.build())
    except BaseException:
        for env in envs:
            with contextlib.suppress(Exception):
                env.close()
        raise
    return envs
