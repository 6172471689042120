"""Where the engine's envs come from: :class:`EnvSource` (an env id, an env, a factory, a vector
env) and the slots episodes play on; envs that block run their sync methods on the engine's
executor."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from gemgym.core import Env, blocks_loop
from gemgym.episodes.policy import EnvAccess
from gemgym.errors import ConfigError

if TYPE_CHECKING:
    from gemgym.vector import VectorEnv

__all__ = ["EnvSource", "Slot"]

StepTuple = tuple[Any, float, bool, bool, dict[str, Any]]


class Slot:
    """An env an episode plays on: ``target`` (an env, or a vector env's handle) with
    ``reset``/``step`` and ``areset``/``astep``; a blocking one's sync methods run on the
    engine's executor (``run``)."""

    def __init__(
        self,
        target: Any,
        env_id: str,
        blocking: bool,
        run: Callable[..., Any],
        capability: Callable[[str], Any],
    ) -> None:
        self.target = target
        self.env_id = env_id
        self.blocking = blocking
        self._run = run
        self.access = EnvAccess(capability)

    async def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> Any:
        opts = None if options is None else dict(options)
        if self.blocking:
            return await self._run(partial(self.target.reset, seed=seed, options=opts))
        return await self.target.areset(seed=seed, options=opts)

    async def step(self, action: Any) -> StepTuple:
        if self.blocking:
            return await self._run(self.target.step, action)  # type: ignore[no-any-return]
        return await self.target.astep(action)  # type: ignore[no-any-return]


def _env_slot(env: Env[Any, Any], env_id: str, run: Callable[..., Any]) -> Slot:
    return Slot(env, env_id, blocks_loop(env), run, lambda name: getattr(env, name)())


def _vector_slot(venv: VectorEnv, index: int, run: Callable[..., Any]) -> Slot:
    def capability(name: str) -> Any:
        return venv.call(name, indices=[index])[0]

    envs = getattr(venv, "envs", None)
    if venv.backend == "sync" and envs is not None:
        # the env itself, in this process (the engine keeps reset/step in order): stepped
        # directly, or on the executor when it blocks, never two calls of one env at once
        env = envs[index]
        return Slot(env, venv.env_ids[index], blocks_loop(env), run, capability)
    return Slot(venv.handle(index), venv.env_ids[index], False, run, capability)


class EnvSource:
    """Where a run's envs come from (see :meth:`make`): a pool of slots to play episodes on."""

    env_id: str = ""

    async def acquire(self, run: Callable[..., Any]) -> Slot:
        """A free slot (made, and warmed up, on the engine's executor when new)."""
        raise NotImplementedError

    def release(self, slot: Slot, healthy: bool) -> None:
        """Give the slot back (an env that failed is closed, not reused)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close what the source made."""

    @staticmethod
    def make(
        env: str | Env[Any, Any] | VectorEnv | Callable[[], Env[Any, Any]] | EnvSource,
        *,
        env_id: str | None = None,
        **make_kwargs: Any,
    ) -> EnvSource:
        """A source from an env id (made with ``make_kwargs``; ``wrappers=`` among them wraps
        every copy), an env (copied with ``spawn``; it is not played itself), a factory, a
        vector env (made with ``autoreset_mode="disabled"``; not closed here), or a source."""
        from gemgym.vector import VectorEnv

        if isinstance(env, EnvSource):
            if make_kwargs:
                raise ConfigError("make_kwargs are only used when env is an id")
            return env
        if isinstance(env, VectorEnv):
            if make_kwargs:
                raise ConfigError("make_kwargs are only used when env is an id")
            return _VectorSource(env)
        if isinstance(env, str):
            from gemgym.registry import spec
            from gemgym.vector.base import EnvRecipe

            kwargs = dict(make_kwargs)
            wrappers = tuple(kwargs.pop("wrappers", None) or ())

            def build() -> Env[Any, Any]:  # on the engine's executor: the lookup may import
                # without the OrderEnforcing layer: the engine keeps reset/step in order itself
                return EnvRecipe(spec=spec(env), kwargs=kwargs, wrappers=wrappers).build()

            return _FactorySource(build, env_id or env)
        if make_kwargs:
            raise ConfigError("make_kwargs are only used when env is an id")
        if isinstance(env, Env):
            name = env_id or (env.spec.id if env.spec is not None else type(env.unwrapped).__name__)
            return _FactorySource(env.spawn, name)
        if callable(env):
            return _FactorySource(env, env_id or "")
        raise ConfigError(
            f"an env source is an env id, an Env, a VectorEnv or a factory, got {type(env).__name__}"
        )

    @staticmethod
    def ray(env: str | Callable[[], Env[Any, Any]], **options: Any) -> EnvSource:
        """A source whose envs live in Ray actors, on any node of a cluster, placed by Ray's
        resources; episodes on a lost node are re-run elsewhere with the same seeds (see
        :class:`gemgym.vector.ray.RayEnvSource` for ``options``, and ``docs/cluster.md``).
        Needs ``pip install "gemgym[ray]"``."""
        from gemgym.vector.ray import RayEnvSource

        return RayEnvSource(env, **options)


class _FactorySource(EnvSource):
    def __init__(self, factory: Callable[[], Env[Any, Any]], env_id: str) -> None:
        self.factory = factory
        self.env_id = env_id
        self._idle: list[Slot] = []
        self._all: list[Slot] = []

    def _new(self) -> Env[Any, Any]:
        env = self.factory()
        try:
            env.warmup()
        except BaseException:
            with contextlib.suppress(Exception):
                env.close()
            raise
        return env

    async def acquire(self, run: Callable[..., Any]) -> Slot:
        if self._idle:
            return self._idle.pop()
        env = await run(self._new)
        env_id = self.env_id or (env.spec.id if env.spec is not None else type(env).__name__)
        slot = _env_slot(env, env_id, run)
        self._all.append(slot)
        return slot

    def release(self, slot: Slot, healthy: bool) -> None:
        if healthy:
            self._idle.append(slot)
            return
        self._all.remove(slot)
        with contextlib.suppress(Exception):
            slot.target.close()

    def close(self) -> None:
        for slot in self._all:
            with contextlib.suppress(Exception):
                slot.target.close()
        self._all.clear()
        self._idle.clear()


class _VectorSource(EnvSource):
    def __init__(self, venv: VectorEnv) -> None:
        if venv.autoreset_mode.value != "disabled":
            raise ConfigError(
                "the engine resets the envs itself; make the vector env with "
                'autoreset_mode="disabled"'
            )
        self.venv = venv
        self.env_id = venv.env_ids[0] if venv.env_ids else ""
        self._free = list(range(venv.num_envs - 1, -1, -1))
        self._slots: dict[int, Slot] = {}
        self._index: dict[int, int] = {}  # id(slot) -> its env's index
        self._wait: asyncio.Event | None = None
        self._warm: asyncio.Future[Any] | None = None

    async def acquire(self, run: Callable[..., Any]) -> Slot:
        if self._warm is None:  # first use: warm every env up, on the executor, once
            self._warm = asyncio.ensure_future(run(self.venv.call, "warmup"))
        await asyncio.shield(self._warm)
        while not self._free:
            self._wait = self._wait or asyncio.Event()
            await self._wait.wait()
            self._wait.clear()
        i = self._free.pop()
        if i not in self._slots:
            self._slots[i] = slot = _vector_slot(self.venv, i, run)
            self._index[id(slot)] = i
        return self._slots[i]

    def release(self, slot: Slot, healthy: bool) -> None:
        self._free.append(self._index[id(slot)])
        self._free.sort(reverse=True)  # lowest free slot first
        if self._wait is not None:
            self._wait.set()
