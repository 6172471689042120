"""The :class:`VectorEnv` interface, autoreset modes, env recipes and the per-env autoreset logic.

Every backend hosts its envs in :class:`EnvSlot` objects (in this process, in worker processes or in
Ray actors). A slot applies the autoreset mode next to its env, so the rules, and the random
streams, are the same in every backend: the same seeds and actions give the same results.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from gemgym.core import Env
from gemgym.errors import ClosedError, ConfigError, VectorEnvError
from gemgym.wrappers.common import OrderEnforcing

if TYPE_CHECKING:
    from gemgym.registry import EnvSpec

__all__ = [
    "AutoresetMode",
    "EnvHandle",
    "EnvRecipe",
    "EnvSlot",
    "SlotBatch",
    "StepTuple",
    "VecStep",
    "VectorEnv",
    "make_vector_env",
]

EnvFactory = Callable[[], Env[Any, Any]]
WrapperFactory = Callable[[Env[Any, Any]], Env[Any, Any]]
FLOAT = np.dtype(np.float64)
BOOL = np.dtype(bool)
"""The dtypes of the reward and flag arrays (dtype objects: ``np.fromiter`` takes them fastest)."""

StepTuple = tuple[Any, float, bool, bool, dict[str, Any]]
"""One env's ``(observation, reward, terminated, truncated, info)``."""
VecStep = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
"""``(observations, rewards, terminated, truncated, infos)`` of a vector step."""


class AutoresetMode(enum.StrEnum):
    """What happens to an env whose episode ended.

    * ``NEXT_STEP``: the next ``step`` resets it (its action is ignored; reward 0, flags false).
    * ``SAME_STEP`` (default): it is reset within the same ``step``; the returned observation and
      info are the reset ones, and the terminal ones are kept in ``info["final_obs"]`` and
      ``info["final_info"]``.
    * ``DISABLED``: nothing happens; call ``reset(options={"reset_mask": mask})``.
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


@dataclass(frozen=True)
class EnvRecipe:
    """How to build one env: a registry spec with kwargs and wrappers, or a factory.

    Recipes travel to worker processes and Ray actors, so the wrappers and the factory must be
    picklable there (module-level classes and functions, :func:`functools.partial` of them; not
    lambdas or closures).
    """

    spec: EnvSpec | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[WrapperFactory, ...] = ()
    factory: EnvFactory | None = None

    @property
    def env_id(self) -> str:
        """The env id, or the factory's name."""
        if self.spec is not None:
            return self.spec.id
        return getattr(self.factory, "__name__", type(self.factory).__name__)

    def build(self) -> Env[Any, Any]:
        """Build the env (in whatever process this runs)."""
        if self.factory is not None:
            env = self.factory()
            for w in self.wrappers:
                env = w(env)
        else:
            from gemgym.registry import make

            if self.spec is None:  # pragma: no cover - the constructors forbid it
                raise ConfigError("an EnvRecipe needs a spec or a factory")
            env = make(self.spec, wrappers=self.wrappers, **dict(self.kwargs))
        if not isinstance(env, Env):
            raise VectorEnvError(f"{self.env_id}: the factory returned {type(env).__name__}")
        return env


def final_info(reset_info: dict[str, Any], obs: Any, info: dict[str, Any]) -> dict[str, Any]:
    """The info of a SAME_STEP autoreset: the reset's info plus the terminal ``final_obs`` and
    ``final_info``. (:meth:`SlotBatch.autoreset` builds the same dict inline: the hot path.)"""
    return {**reset_info, "final_obs": obs, "final_info": info}


class EnvSlot:
    """One env plus the autoreset rule; what every backend hosts.

    ``step``/``astep`` return the vector-level result of one env (autoreset applied).
    ``next_seed`` (set for an env rebuilt after a crash) seeds its next reset that gives no seed.
    """

    __slots__ = ("env", "mode", "needs_reset", "next_seed")

    def __init__(
        self,
        env: Env[Any, Any],
        mode: AutoresetMode,
        needs_reset: bool = False,
        next_seed: int | None = None,
    ) -> None:
        self.env = env
        self.mode = mode
        self.needs_reset = needs_reset
        self.next_seed = next_seed

    def _seed(self, seed: int | None) -> int | None:
        if seed is None:
            seed, self.next_seed = self.next_seed, None
        return seed

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=self._seed(seed), options=options)
        self.needs_reset = False
        return obs, info

    def step(self, action: Any) -> StepTuple:
        if self.needs_reset:  # only set in NEXT_STEP mode
            obs, info = self.env.reset(seed=self._seed(None))
            self.needs_reset = False
            return obs, 0.0, False, False, info
        result = self.env.step(action)
        return self.finish(result) if result[2] or result[3] else result

    def finish(self, result: StepTuple) -> StepTuple:
        """Apply the autoreset mode to the result of a step that ended the episode."""
        obs, reward, terminated, truncated, info = result
        if self.mode is AutoresetMode.SAME_STEP:
            reset_obs, reset_info = self.env.reset()
            return reset_obs, reward, terminated, truncated, final_info(reset_info, obs, info)
        if self.mode is AutoresetMode.NEXT_STEP:
            self.needs_reset = True
        return result

    async def areset(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = await self.env.areset(seed=self._seed(seed), options=options)
        self.needs_reset = False
        return obs, info

    async def astep(self, action: Any) -> StepTuple:
        if self.needs_reset:
            obs, info = await self.env.areset(seed=self._seed(None))
            self.needs_reset = False
            return obs, 0.0, False, False, info
        result = await self.env.astep(action)
        if not (result[2] or result[3]):
            return result
        if self.mode is AutoresetMode.SAME_STEP:
            obs, reward, terminated, truncated, info = result
            reset_obs, reset_info = await self.env.areset()
            return reset_obs, reward, terminated, truncated, final_info(reset_info, obs, info)
        return self.finish(result)

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        return getattr(self.env, name)(*args)


ResetItem = tuple[int, int | None, dict[str, Any] | None]
"""``(env_index, seed, options)`` of one env to reset."""


def group_items(
    where: Sequence[tuple[int, int]], items: Sequence[tuple[int, Any]]
) -> dict[int, list[tuple[int, int, Any]]]:
    """Group ``(env_index, payload)`` items by host: ``{host: [(position, local_index, payload)]}``.

    ``where[i]`` is ``(host, local_index)`` of env ``i`` (a worker process or a Ray actor).
    """
    groups: dict[int, list[tuple[int, int, Any]]] = {}
    for pos, (i, payload) in enumerate(items):
        k, j = where[i]
        groups.setdefault(k, []).append((pos, j, payload))
    return groups


def step_all(slots: Sequence[EnvSlot], actions: Sequence[Any]) -> list[StepTuple]:
    """Step every slot with its action, autoreset applied: the backends' hot loop."""
    out = []
    for slot, action in zip(slots, actions, strict=True):
        if slot.needs_reset:
            out.append(slot.step(action))
            continue
        result = slot.env.step(action)
        out.append(slot.finish(result) if result[2] or result[3] else result)
    return out


Columns = tuple[
    list[Any], Sequence[float], Sequence[bool], Sequence[bool], list[dict[str, Any]], bool, bool
]
"""What :meth:`SlotBatch.columns` returns."""


class SlotBatch:
    """The full-batch step of the envs one host holds: the hot path of the ``sync`` backend and
    of each ``process`` worker.

    The envs' bound ``step`` methods are called from C (``map`` + ``operator.call``) and the
    results turned into columns once; only ended envs go through Python. In SAME_STEP mode, once
    every env has been reset, the ``step`` and ``reset`` below an outermost
    :class:`~gemgym.wrappers.OrderEnforcing` are called: each ended env is reset before the batch
    returns, so that layer's check could never fire, and it stays ready.

    Call :meth:`forget` after anything that steps or resets the envs through their slots and
    raises, or that this class cannot see (``call``): the layers are then looked at again.
    """

    __slots__ = ("mode", "resets", "slots", "steps")

    def __init__(self, slots: Sequence[EnvSlot], mode: AutoresetMode) -> None:
        self.slots = list(slots)
        self.mode = mode
        self.steps: list[Any] | None = None
        """The bound step methods of the hot path; made by :meth:`hot`, dropped by
        :meth:`forget`."""
        self.resets: list[Any] = []
        """The matching bound reset methods."""

    def forget(self) -> None:
        """Drop the cached methods: the next batch checks the order layers again."""
        self.steps = None

    def hot(self) -> list[Any]:
        """Make the hot path's step methods (and their resets, in :attr:`resets`). They are
        cached, except while an env never reset must still meet its order layer's refusal."""
        envs = [s.env for s in self.slots]
        same_step = self.mode is AutoresetMode.SAME_STEP
        ready = same_step and all(e.has_reset for e in envs if type(e) is OrderEnforcing)
        if ready:
            envs = [e.env if type(e) is OrderEnforcing else e for e in envs]
        steps = [e.step for e in envs]
        self.resets = [e.reset for e in envs]
        self.steps = steps if ready or not same_step else None
        return steps

    def run(self, actions: Sequence[Any]) -> list[StepTuple]:
        """Step every env with its action (no autoreset yet: see :meth:`autoreset`)."""
        if self.mode is AutoresetMode.NEXT_STEP:
            return step_all(self.slots, actions)
        done: list[StepTuple] = []
        try:
            done.extend(map(operator.call, self.steps or self.hot(), actions))
        except BaseException:
            self.fail(done)
            raise
        return done

    def autoreset(
        self,
        ended: Iterable[int],
        obs: Sequence[Any],
        infos: Sequence[dict[str, Any]],
        obs_out: list[Any],
        infos_out: list[dict[str, Any]],
    ) -> None:
        """SAME_STEP: reset the ``ended`` envs; their reset observation and info (with the
        terminal ``final_obs`` and ``final_info``) replace theirs in ``obs_out``/``infos_out``."""
        resets = self.resets
        for i in ended:
            try:
                obs_out[i], reset_info = resets[i]()
            except BaseException:
                self.reset_failed(i)
                raise
            # final_info(), inlined
            infos_out[i] = {**reset_info, "final_obs": obs[i], "final_info": infos[i]}

    def columns(self, actions: Sequence[Any]) -> Columns:
        """:meth:`run` and :meth:`autoreset` for one action per env (at least one env):
        ``(observations, rewards, terminated, truncated, infos, any_terminated,
        any_truncated)``, the first five as columns (one entry per env)."""
        obs, rewards, terminated, truncated, infos = zip(*self.run(actions), strict=True)
        obs_l, infos_l = list(obs), list(infos)
        any_term, any_trunc = True in terminated, True in truncated
        if (any_term or any_trunc) and self.mode is AutoresetMode.SAME_STEP:
            ended = compress(range(len(obs)), map(operator.or_, terminated, truncated))
            self.autoreset(ended, obs, infos, obs_l, infos_l)
        return obs_l, rewards, terminated, truncated, infos_l, any_term, any_trunc

    def fail(self, done: list[StepTuple]) -> None:
        """An env raised after the envs of ``done`` were stepped: in SAME_STEP mode, reset
        those that ended (as a slot does, one env at a time); look at the layers again."""
        self.steps = None
        if self.mode is AutoresetMode.SAME_STEP:
            for i, result in enumerate(done):
                if result[2] or result[3]:
                    try:
                        self.resets[i]()
                    except Exception:  # the first env's error is the one raised
                        self.reset_failed(i)

    def reset_failed(self, i: int) -> None:
        """Env ``i`` ended and its reset raised: its order layer, which did not see the end,
        must refuse the next step."""
        self.steps = None
        env = self.slots[i].env
        if type(env) is OrderEnforcing:
            env.require_reset()


def stack(results: Sequence[StepTuple]) -> VecStep:
    """Turn per-env results into the batched 5-tuple."""
    return stack_columns(*(zip(*results, strict=True) if results else ([],) * 5))


def stack_columns(
    obs: Sequence[Any],
    rewards: Sequence[float],
    terminated: Sequence[bool],
    truncated: Sequence[bool],
    infos: Sequence[dict[str, Any]],
) -> VecStep:
    """The batched 5-tuple from its five columns."""
    n = len(obs)
    return (
        list(obs),
        np.fromiter(rewards, FLOAT, n),
        np.fromiter(terminated, BOOL, n),
        np.fromiter(truncated, BOOL, n),
        list(infos),
    )


class VectorEnv:
    """A batch of envs stepped together.

    ``reset(seed=s)`` seeds env ``i`` with ``s + i``. ``step(actions)`` takes one action per env
    (a sequence) or a dict ``{env_index: action}`` that steps only those envs, and returns
    ``(observations, rewards, terminated, truncated, infos)`` for the stepped envs (in the order
    given), with numpy arrays for the rewards and flags. ``astep``/``areset`` are the asyncio
    versions; :meth:`handle` gives one env's own async view.

    Backends implement :meth:`_reset_items`, :meth:`_step_items` and, where they can do better
    than running the sync version, :meth:`_astep_items`.
    """

    num_envs: int
    env_ids: list[str]
    autoreset_mode: AutoresetMode
    backend: str = "?"
    _closed: bool = False

    def _init_common(self, recipes: Sequence[EnvRecipe], autoreset_mode: Any) -> None:
        if not recipes:
            raise ConfigError("a vector env needs at least one env")
        self.recipes = list(recipes)
        self.env_ids = [r.env_id for r in self.recipes]
        self.num_envs = len(self.recipes)
        self.autoreset_mode = AutoresetMode.coerce(autoreset_mode)
        self._last_seeds: dict[int, int] = {}  # env index -> the seed of its last seeded reset
        self._false = np.zeros(self.num_envs, dtype=bool)  # an all-False flag column to copy

    # -- argument handling (shared by all backends) ---------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"this {type(self).__name__} is closed; make a new one")

    def _reset_plan(
        self,
        seed: int | Sequence[int | None] | None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None,
    ) -> list[ResetItem]:
        self._check_open()
        n = self.num_envs
        if seed is None or isinstance(seed, int | np.integer):
            seeds: list[int | None] = [None if seed is None else int(seed) + i for i in range(n)]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != n:
                raise VectorEnvError(f"got {len(seeds)} seeds for {n} envs; give one per env")
        mask: Any = None
        if options is None or isinstance(options, Mapping):
            common = dict(options or {})
            mask = common.pop("reset_mask", None)
            per_env: list[dict[str, Any] | None] = [dict(common) if common else None] * n
        else:
            per_env = [None if o is None else dict(o) for o in options]
            if len(per_env) != n:
                raise VectorEnvError(
                    f"got {len(per_env)} option dicts for {n} envs; give one per env (or None)"
                )
        if mask is not None and len(mask) != n:
            raise VectorEnvError(f"reset_mask has {len(mask)} entries for {n} envs")
        items = [(i, seeds[i], per_env[i]) for i in range(n) if mask is None or mask[i]]
        self._note_seeds(items)
        return items

    def _note_seeds(self, items: Sequence[ResetItem]) -> None:
        """Remember each env's last reset seed (for :meth:`_restart_seeds`)."""
        for i, seed, _ in items:
            if seed is not None:
                self._last_seeds[i] = seed

    def _restart_seeds(self, indices: Sequence[int], restarts: int) -> list[int | None]:
        """Seeds for envs rebuilt after their worker was lost (the ``restarts``-th loss): one
        derived from the env's last reset seed and ``restarts``, or ``None`` for an env never
        seeded. So a seeded run that loses a worker at the same step plays the same episodes."""
        out: list[int | None] = []
        for i in indices:
            base = self._last_seeds.get(i)
            if base is None:
                out.append(None)
            else:
                entropy = [abs(base), int(base < 0), restarts]
                out.append(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
        return out

    def _step_plan(self, actions: Sequence[Any] | Mapping[int, Any]) -> list[tuple[int, Any]]:
        self._check_open()
        n = self.num_envs
        if isinstance(actions, Mapping):
            items = [(int(i), a) for i, a in actions.items()]
            for i, _ in items:
                if not 0 <= i < n:
                    raise VectorEnvError(f"env index {i} out of range 0..{n - 1}")
            return items
        if isinstance(actions, str) or len(actions) != n:
            got = "a string" if isinstance(actions, str) else f"{len(actions)} actions"
            raise VectorEnvError(
                f"got {got} for {n} envs; pass one action per env, or a dict "
                "{env_index: action} to step only some envs"
            )
        return list(enumerate(actions))

    # -- public API ----------------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every env, or those selected by ``options={"reset_mask": mask}``.

        Args:
            seed: an int seeds env ``i`` with ``seed + i``; a list gives one seed per env; ``None``
                continues each env's own random stream.
            options: one dict for every env (it may hold ``"reset_mask"``), or one per env.

        Returns:
            ``(observations, infos)`` of the envs that were reset, in index order.
        """
        results = self._reset_items(self._reset_plan(seed, options))
        return [r[0] for r in results], [r[1] for r in results]

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        """Step the envs; see the class docstring."""
        return stack(self._step_items(self._step_plan(actions)))

    async def areset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Async :meth:`reset`."""
        results = await self._areset_items(self._reset_plan(seed, options))
        return [r[0] for r in results], [r[1] for r in results]

    async def astep(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        """Async :meth:`step`: the envs run concurrently; ``await`` returns when all are done.

        Several ``astep`` calls on disjoint envs may run at the same time (see :meth:`handle`).
        """
        return stack(await self._astep_items(self._step_plan(actions)))

    def handle(self, index: int) -> EnvHandle:
        """One env of the batch as an object with ``step``/``astep`` (autoreset applied)."""
        if not 0 <= index < self.num_envs:
            raise VectorEnvError(f"env index {index} out of range 0..{self.num_envs - 1}")
        return EnvHandle(self, index)

    def call(self, name: str, *args: Any) -> list[Any]:
        """Call method ``name`` on every env (e.g. ``"sample_random_action"``); one result each."""
        self._check_open()
        return self._call_items(name, args)

    def close(self) -> None:
        """Release every env, thread, worker process and actor (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._close()

    # -- backend hooks -------------------------------------------------------------------------
    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        raise NotImplementedError

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        raise NotImplementedError

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        raise NotImplementedError

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        return await asyncio.get_running_loop().run_in_executor(None, self._reset_items, items)

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        return await asyncio.get_running_loop().run_in_executor(None, self._step_items, items)

    def _close(self) -> None:
        pass

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._closed and hasattr(self, "recipes"):
            with contextlib.suppress(Exception):  # interpreter shutdown
                self.close()

    def __repr__(self) -> str:
        ids = sorted(set(getattr(self, "env_ids", [])))
        return f"<{type(self).__name__} num_envs={getattr(self, 'num_envs', 0)} ids={ids}>"


class EnvHandle:
    """One env of a :class:`VectorEnv`: ``step``/``astep`` return that env's 5-tuple.

    A trainer that serves each env as soon as its model reply arrives awaits
    ``venv.handle(i).astep(reply)`` for each ``i`` independently; there is no batching barrier.
    """

    __slots__ = ("index", "venv")

    def __init__(self, venv: VectorEnv, index: int) -> None:
        self.venv = venv
        self.index = index

    def step(self, action: Any) -> StepTuple:
        """Step this env alone (autoreset applied)."""
        return self.venv._step_items(self.venv._step_plan({self.index: action}))[0]

    async def astep(self, action: Any) -> StepTuple:
        """Async :meth:`step`."""
        return (await self.venv._astep_items(self.venv._step_plan({self.index: action})))[0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset this env alone (``seed`` is used as given, not offset by the index)."""
        self.venv._check_open()
        self.venv._note_seeds([(self.index, seed, options)])
        return self.venv._reset_items([(self.index, seed, options)])[0]

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Async :meth:`reset`."""
        self.venv._check_open()
        self.venv._note_seeds([(self.index, seed, options)])
        return (await self.venv._areset_items([(self.index, seed, options)]))[0]


BACKENDS = ("sync", "thread", "process", "ray")


def make_vector_env(
    env_ids: Sequence[str] | None = None,
    env_kwargs: Sequence[Mapping[str, Any]] | None = None,
    *,
    env_fns: Sequence[EnvFactory] | None = None,
    wrappers: Sequence[WrapperFactory] | None = None,
    backend: str = "sync",
    autoreset_mode: AutoresetMode | str | None = None,
    **backend_options: Any,
) -> VectorEnv:
    """Build a vector env of the given backend.

    Args:
        env_ids: one registered id per env (mixed ids are fine).
        env_kwargs: one kwargs mapping per env (defaults to none).
        env_fns: instead of ids, one zero-argument factory per env (picklable for the ``process``
            and ``ray`` backends).
        wrappers: wrapper factories applied to every env, in order (picklable for ``process`` and
            ``ray``).
        backend: ``"sync"``, ``"thread"``, ``"process"`` or ``"ray"``.
        autoreset_mode: see :class:`AutoresetMode`.
        **backend_options: options of the backend class (e.g. ``num_workers``, ``step_timeout``
            for ``process``; ``max_workers`` for ``thread``).
    """
    from gemgym.registry import check_kwargs, registry

    wraps = tuple(wrappers or ())
    if (env_ids is None) == (env_fns is None):
        raise ConfigError("give either env_ids or env_fns")
    if env_fns is not None:
        recipes = [EnvRecipe(factory=f, wrappers=wraps) for f in env_fns]
    else:
        ids = list(env_ids or ())
        kws = list(env_kwargs) if env_kwargs is not None else [{}] * len(ids)
        if len(kws) != len(ids):
            raise ConfigError(f"got {len(kws)} kwargs mappings for {len(ids)} env ids")
        specs = {i: registry.spec(i) for i in set(ids)}
        recipes = [
            EnvRecipe(spec=specs[i], kwargs=dict(kw), wrappers=wraps)
            for i, kw in zip(ids, kws, strict=True)
        ]
    if backend == "sync":
        from gemgym.vector.sync import SyncVectorEnv as cls
    elif backend == "thread":
        from gemgym.vector.thread import ThreadVectorEnv as cls  # type: ignore[assignment]
    elif backend == "process":
        from gemgym.vector.process import ProcessVectorEnv as cls  # type: ignore[assignment]
    elif backend == "ray":
        from gemgym.vector.ray import RayVectorEnv as cls  # type: ignore[assignment]
    else:
        raise ConfigError(f"unknown vector backend {backend!r}; use one of {list(BACKENDS)}")
    check_kwargs(cls, backend_options, f"the {backend!r} vector backend")
    return cls(recipes, autoreset_mode=autoreset_mode, **backend_options)
