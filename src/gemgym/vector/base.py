"""The :class:`VectorEnv` interface, env recipes and :func:`make_vector_env`.

Every backend keeps its envs in :class:`~gemgym.vector._group.EnvGroup` objects (in this process, in
worker processes or in Ray actors), the one place that steps and resets them and applies the
autoreset mode, so the rules, and the random streams, are the same in every backend: the same seeds
and actions give the same results.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gemgym.core import Env
from gemgym.errors import ClosedError, ConfigError, VectorEnvError
from gemgym.vector._group import AutoresetMode, StepTuple, VecStep, stack

if TYPE_CHECKING:
    from gemgym.registry import EnvSpec

__all__ = [
    "AutoresetMode",
    "EnvHandle",
    "EnvRecipe",
    "StepTuple",
    "VecStep",
    "VectorEnv",
    "make_vec",
    "make_vector_env",
]

EnvFactory = Callable[[], Env[Any, Any]]
WrapperFactory = Callable[[Env[Any, Any]], Env[Any, Any]]
ResetItem = tuple[int, int | None, dict[str, Any] | None]
"""``(env_index, seed, options)`` of one env to reset."""


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
        """Build the env (in whatever process this runs).

        A registered env is made without the :class:`~gemgym.wrappers.OrderEnforcing` layer
        that :func:`gemgym.make` adds (``order_enforce=False`` in the spec it is made from, so
        its ``spec`` says so too): the vector env resets every ended env itself and keeps the
        order of calls in its :class:`~gemgym.vector._group.EnvGroup`. A factory's env is used
        as it is built.
        """
        if self.factory is not None:
            env = self.factory()
            for w in self.wrappers:
                env = w(env)
        else:
            from gemgym.registry import make

            if self.spec is None:  # pragma: no cover - the constructors forbid it
                raise ConfigError("an EnvRecipe needs a spec or a factory")
            spec = dataclasses.replace(self.spec, order_enforce=False)
            env = make(spec, wrappers=self.wrappers, **dict(self.kwargs))
        if not isinstance(env, Env):
            raise VectorEnvError(f"{self.env_id}: the factory returned {type(env).__name__}")
        return env


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
        """Hook: the envs of ``items`` are about to be reset with these seeds."""

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

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None) -> list[Any]:
        """Call method ``name`` on every env (e.g. ``"sample_random_action"``); one result each.

        ``indices``: call only these envs, in this order (one result each); on the ``process``
        and ``ray`` backends only the workers holding them are asked.
        """
        self._check_open()
        if indices is None:
            return self._call_items(name, args, None)
        chosen = [int(i) for i in indices]
        bad = [i for i in chosen if not 0 <= i < self.num_envs]
        if bad:
            raise ConfigError(f"indices {bad} are out of range for {self.num_envs} envs")
        return self._call_items(name, args, chosen) if chosen else []

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

    def _call_items(self, name: str, args: tuple[Any, ...], indices: list[int] | None) -> list[Any]:
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


def make_vec(
    env_ids: str | Sequence[str],
    num_envs: int | None = None,
    *,
    wrappers: Sequence[WrapperFactory] | None = None,
    vec_kwargs: Sequence[Mapping[str, Any]] | None = None,
    backend: str = "sync",
    autoreset_mode: Any = None,
    backend_options: Mapping[str, Any] | None = None,
    seed: int | None = None,
    async_mode: bool = False,
    **kwargs: Any,
) -> VectorEnv:
    """Build a vector of envs, GEM-style (``gemgym.make_vec``; see :mod:`gemgym.vector`).

    Args:
        env_ids: one id (repeated ``num_envs`` times) or one id per env (mixed ids are allowed).
        num_envs: number of envs when ``env_ids`` is a single id (default 1).
        wrappers: wrapper factories applied to every env.
        vec_kwargs: per-env keyword arguments, one mapping per env.
        backend: ``"sync"`` (a loop in this process), ``"thread"``, ``"process"`` or ``"ray"``
            (see :mod:`gemgym.vector`).
        autoreset_mode: ``"next_step"``, ``"same_step"`` (default) or ``"disabled"``.
        backend_options: options of the backend, e.g. ``{"num_workers": 2, "step_timeout": 30}``
            for ``"process"``.
        seed: GEM compatibility: seed env ``i`` with ``seed + i`` right away (the envs are reset
            once); later unseeded resets continue each env's seeded stream.
        async_mode: GEM compatibility: ``True`` selects the ``"thread"`` backend.
        **kwargs: keyword arguments for every env.
    """
    # Only make_vec's own parameters are checked here; the ids, the per-env kwargs, the backend
    # and its options are checked by make_vector_env, the one place for both entry points.
    if num_envs is not None and (
        isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1
    ):
        raise ConfigError(f"num_envs must be a positive int, got {num_envs!r}")
    if isinstance(env_ids, str):
        ids = [env_ids] * (1 if num_envs is None else num_envs)
    else:
        ids = list(env_ids)
        if num_envs is not None and num_envs != len(ids):
            raise ConfigError(
                f"num_envs={num_envs} but {len(ids)} env ids were given; "
                "pass one id with num_envs, or a list of ids without it"
            )
    per_env = [{**kwargs, **vk} for vk in vec_kwargs] if vec_kwargs is not None else None
    if per_env is None and kwargs:
        per_env = [dict(kwargs) for _ in ids]
    if async_mode and backend == "sync":
        backend = "thread"
    venv = make_vector_env(
        ids,
        per_env,
        wrappers=wrappers,
        backend=backend,
        autoreset_mode=autoreset_mode,
        **dict(backend_options or {}),
    )
    if seed is not None:
        venv.reset(seed=seed)
    return venv
