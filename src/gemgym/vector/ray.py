"""The ``ray`` backend: envs hosted by Ray actors, so one trainer can drive envs on a cluster.

Ray is an optional extra (``pip install "gemgym[ray]"``) imported only when this backend is built.
Each actor hosts a block of envs and steps them in one call; actors are placed by Ray anywhere in
the cluster. If Ray is not initialised yet, ``ray.init()`` is called with its defaults (connect
to ``RAY_ADDRESS`` or start a local cluster); :meth:`RayVectorEnv.close` kills the actors but
leaves Ray running.

Crash isolation works as in the ``process`` backend (both are built on
:class:`~gemgym.vector._hosted.HostedVectorEnv`): an actor that dies (its process crashed or its
node was lost) or takes longer than ``step_timeout`` seconds for a step is killed and replaced, its
envs are rebuilt, and each of them is reported once as ``truncated=True``, reward 0, with
``info["worker_error"]``; the other actors' results come back as usual (and a rebuilt env that was
seeded gets a derived seed, as there). An exception raised by an env is re-raised as itself (not as
Ray's wrapper), and the actor stays up.

The episode engine plays on Ray through :class:`RayEnvSource` (``EnvSource.ray(...)``): its envs
live in Ray actors placed by Ray's resources, each step is one actor call awaited on the engine's
event loop, and an episode whose node died is re-run on another node with the same seed (see
``docs/cluster.md``). :func:`connect` joins a cluster (``ray.init(address=...)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gemgym.core import Env
from gemgym.episodes.sources import EnvSource, Slot
from gemgym.errors import ConfigError, EnvLostError, missing_dependency
from gemgym.vector._group import EnvGroup, StepTuple, build_all
from gemgym.vector._hosted import Host, HostedVectorEnv, HostLost
from gemgym.vector.base import AutoresetMode, EnvRecipe, ResetItem

__all__ = ["RayEnvSource", "RayVectorEnv", "connect"]


def _env_error(task_error: Any) -> BaseException:
    """The env's own exception inside Ray's ``RayTaskError`` (or Ray's best stand-in)."""
    cause = task_error.as_instanceof_cause()
    inner = getattr(cause, "cause", None)
    return inner if isinstance(inner, BaseException) else cause


class _ActorGroup(EnvGroup):
    """The body of one Ray actor: an :class:`EnvGroup` that builds its envs in the actor."""

    __slots__ = ()

    def __init__(
        self,
        recipes: list[EnvRecipe],
        mode: AutoresetMode,
        first: int,
        needs_reset: bool,
        seeds: list[int | None] | None,
    ) -> None:
        envs = build_all(recipes)
        super().__init__(envs, mode, first=first, needs_reset=needs_reset, seeds=seeds)

    def ready(self) -> bool:
        return True


class _Actor(Host):
    """The vector env's record of one actor."""

    def __init__(self, index: int, lo: int, hi: int) -> None:
        super().__init__(index, lo, hi)
        self.actor: Any = None


class _Outcome:
    """An actor's answer (or its exception) already awaited, in place of its object ref."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise missing_dependency("ray", "ray") from None
    return ray


class RayVectorEnv(HostedVectorEnv[_Actor]):
    """Envs in Ray actors.

    Args:
        recipes: one :class:`~gemgym.vector.base.EnvRecipe` per env (pickled to the actors, so
            wrappers and factories must be picklable; cloudpickle takes lambdas too).
        autoreset_mode: see :class:`~gemgym.vector.AutoresetMode`.
        num_actors: actors to spread the envs over (default: the cluster's CPU count, at most
            one per env).
        actor_options: passed to ``.options()`` of each actor (default ``{"num_cpus": 0}``, so
            that actors do not reserve cluster CPUs; pass ``{"num_cpus": 1}`` to spread them).
        step_timeout: seconds an actor may take for one (batched) step before it is killed and
            replaced; ``None`` waits forever (a dead actor is still detected).

    Attributes:
        restarts: how many times an actor was replaced.
    """

    backend = "ray"
    host_kind = "actor"
    host_restarted = "replaced"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        autoreset_mode: AutoresetMode | str | None = None,
        num_actors: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
        step_timeout: float | None = None,
    ) -> None:
        ray = self._ray = _import_ray()
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        if num_actors is None:
            num_actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._init_hosts(recipes, autoreset_mode, num_actors, step_timeout)
        options = dict(actor_options) if actor_options is not None else {"num_cpus": 0}
        self._remote_cls = ray.remote(_ActorGroup).options(**options)
        self._start_hosts()

    @property
    def _actors(self) -> list[Any]:
        return [host.actor for host in self._hosts]

    # -- transport -------------------------------------------------------------------------------
    def _new_host(self, index: int, lo: int, hi: int) -> _Actor:
        return _Actor(index, lo, hi)

    def _start(self, host: _Actor, needs_reset: bool, seeds: list[int | None] | None) -> None:
        recipes = [self.recipes[i] for i in host.env_indices]
        mode = self.autoreset_mode
        host.actor = self._remote_cls.remote(recipes, mode, host.lo, needs_reset, seeds)

    def _await_ready(self, host: _Actor) -> None:
        self._ray.get(host.actor.ready.remote())

    def _stop(self, host: _Actor) -> None:
        with contextlib.suppress(Exception):  # already dead
            self._ray.kill(host.actor)

    def _send(self, host: _Actor, cmd: str, payload: Any) -> Any:
        return getattr(host.actor, cmd).remote(payload)

    def _recv(self, host: _Actor, ticket: Any, deadline: float | None, what: str) -> Any:
        ray = self._ray
        if type(ticket) is _Outcome:
            out = ticket.value
        else:
            try:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                return ray.get(ticket, timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                with contextlib.suppress(Exception):
                    ray.cancel(ticket, force=True)
                raise HostLost(f"no reply within {self.step_timeout} s while {what}") from None
            except Exception as e:  # the actor died or an env raised
                out = e
        if isinstance(out, ray.exceptions.RayActorError):
            raise HostLost("the actor died")
        if isinstance(out, ray.exceptions.RayTaskError):  # the env raised
            raise _env_error(out) from None
        if isinstance(out, BaseException):
            raise out
        return out

    # -- asyncio: the actors' answers are awaited on the event loop ------------------------------
    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        if self.step_timeout is not None:  # timeouts are kept by the blocking path
            return await asyncio.get_running_loop().run_in_executor(None, self._step_items, items)
        results, sent = self._send_steps(items)
        outs = await asyncio.gather(*(ticket for *_, ticket in sent), return_exceptions=True)
        done = [
            (host, todo, _Outcome(out)) for (host, todo, _), out in zip(sent, outs, strict=True)
        ]
        self._take_steps(results, done, None)
        return results

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        results, sent = self._send_resets(items)
        outs = await asyncio.gather(*(ticket for *_, ticket in sent), return_exceptions=True)
        done = [
            (host, group, _Outcome(out)) for (host, group, _), out in zip(sent, outs, strict=True)
        ]
        self._take_resets(results, done)
        return results

    # -- closing ---------------------------------------------------------------------------------
    def _stop_all(self) -> None:
        for host in self._hosts:
            self._stop(host)
        # ray.kill is asynchronous: wait (at most 10 s) until every actor is really gone, so that
        # nothing of this vector env runs after close() returns.
        deadline = time.monotonic() + 10.0
        for host in self._hosts:
            while host.actor is not None and time.monotonic() < deadline:
                try:
                    self._ray.get(
                        host.actor.ready.remote(), timeout=max(0.1, deadline - time.monotonic())
                    )
                except Exception:  # RayActorError: it is gone (or the deadline passed)
                    break
                time.sleep(0.05)

    def _close(self) -> None:
        try:
            self._ray.get([host.actor.close.remote(None) for host in self._hosts], timeout=30)
        except Exception:  # pragma: no cover - a dead actor has nothing left to close
            pass
        finally:
            self._stop_all()


# -- the episode engine on Ray -------------------------------------------------------------------


def connect(address: str | None = None, **init_kwargs: Any) -> Any:
    """Join the Ray cluster at ``address`` (``"auto"``: the one this machine is part of, or
    ``host:port`` of its head; ``None``: ``RAY_ADDRESS``, else a local one-machine cluster) and
    return the ``ray`` module; a no-op when Ray is already initialised."""
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    init_kwargs.setdefault("include_dashboard", False)
    try:
        ray.init(address=address, **init_kwargs)
    except ConnectionError as e:
        auth = ""
        if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
            auth = (
                "; if the cluster is up, it may use Ray's token authentication (what `ray start "
                "--head` turns on since Ray 2.59): set RAY_AUTH_MODE=token here, with the head's "
                "token in RAY_AUTH_TOKEN or ~/.ray/auth_token (`ray get-auth-token` on the head)"
            )
        raise ConfigError(
            f"no Ray cluster answers at {address!r} ({e}); start its head with `ray start "
            "--head --port 6379`, join nodes with `ray start --address HEAD:6379`, then pass "
            f"HEAD:6379 or 'auto' (docs/cluster.md){auth}"
        ) from None
    return ray


def _env_name(env: Env[Any, Any]) -> str:
    return env.spec.id if env.spec is not None else type(env.unwrapped).__name__


class _EnvHost:
    """The body of one Ray actor hosting envs for the episode engine (a threaded actor: one
    env's slow step does not hold the others). Envs are made on demand and named by a number."""

    def __init__(self, factory: Callable[[], Env[Any, Any]]) -> None:
        self._factory = factory
        self._envs: dict[int, Env[Any, Any]] = {}
        self._next = 0
        self._lock = threading.Lock()

    def node(self) -> str:
        """The id of the Ray node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def make(self) -> tuple[int, str]:
        env = self._factory()
        try:
            env.warmup()
        except BaseException:
            with contextlib.suppress(Exception):
                env.close()
            raise
        with self._lock:
            number, self._next = self._next, self._next + 1
            self._envs[number] = env
        return number, _env_name(env)

    def reset(
        self, number: int, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        return self._envs[number].reset(seed=seed, options=options)

    def step(self, number: int, action: Any) -> StepTuple:
        return self._envs[number].step(action)

    def call(self, number: int, name: str) -> Any:
        return getattr(self._envs[number], name)()

    def drop(self, number: int) -> None:
        env = self._envs.pop(number, None)
        if env is not None:
            env.close()

    def close(self) -> None:
        for number in list(self._envs):
            with contextlib.suppress(Exception):
                self.drop(number)


class _HostRecord:
    """The source's record of one actor: its handle, how many times it was replaced, how many
    envs are bound to it."""

    __slots__ = ("generation", "handle", "load")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.generation = 0
        self.load = 0


class _RayEnv:
    """The engine's view of one env in an actor (a slot's target): ``areset``/``astep`` are
    actor calls awaited on the event loop. It keeps the episode's seed, options and actions, so
    that an episode whose actor was lost is re-run on the replacement (see
    :class:`RayEnvSource`)."""

    def __init__(self, source: RayEnvSource, host: _HostRecord) -> None:
        self.source = source
        self.host = host
        self.generation = -1  # the actor generation this env lives in (-1: not made yet)
        self.number = -1
        self.env_id = source.env_id
        self.episode: tuple[int | None, dict[str, Any] | None, list[Any]] | None = None

    async def make(self) -> None:
        await self._call("make_only", replay=False)

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self.episode = None
        out = await self._call("reset", seed, options, replay=False)
        self.episode = (seed, options, [])
        return out  # type: ignore[no-any-return]

    async def astep(self, action: Any) -> StepTuple:
        out = await self._call("step", action, replay=True)
        if self.episode is not None:
            self.episode[2].append(action)
        return out  # type: ignore[no-any-return]

    def capability(self, name: str) -> Any:
        """A policy's request (``expert_action``): a blocking actor call, off the hot path."""
        ray = self.source._ray
        try:
            return ray.get(self.host.handle.call.remote(self.number, name))
        except ray.exceptions.RayTaskError as e:
            raise _env_error(e) from None

    async def _replay(self, handle: Any) -> None:
        """Play the episode so far again on a fresh env: its seed, options and actions."""
        if self.episode is None:
            return
        seed, options, actions = self.episode
        if seed is None:
            raise EnvLostError(
                f"the Ray actor hosting {self.env_id} was lost mid-episode and the episode "
                "was reset without a seed, so it cannot be re-run the same; give the episodes "
                "seeds (EpisodeSpec(seed=...)) to have them re-run after a node loss"
            )
        self.source.replays += 1
        await handle.reset.remote(self.number, seed, options)
        for action in actions:
            await handle.step.remote(self.number, action)

    async def _call(self, method: str, *args: Any, replay: bool) -> Any:
        source, host = self.source, self.host
        ray = source._ray
        lost = 0
        while True:
            handle, generation = host.handle, host.generation
            try:
                if self.generation != generation:  # first use, or the actor was replaced
                    rerun = self.generation != -1 and replay
                    made = handle.make.remote()
                    self.number, self.env_id = await source._started(made, lost)
                    self.generation = generation
                    if rerun:
                        await self._replay(handle)
                if method == "make_only":
                    return None
                return await getattr(handle, method).remote(self.number, *args)
            except ray.exceptions.RayActorError as e:
                lost += 1
                source._replace(host, generation)  # for the other envs it hosted, too
                if lost > source.max_replays:
                    raise EnvLostError(
                        f"the Ray actor hosting {self.env_id} was lost {lost} times in one "
                        f"episode (last: {type(e).__name__}); check the cluster's nodes "
                        "(`ray status`)"
                    ) from None
            except ray.exceptions.RayTaskError as e:  # the env itself raised
                raise _env_error(e) from None


class RayEnvSource(EnvSource):
    """The episode engine's envs in Ray actors (``EnvSource.ray(env, ...)``).

    Each actor hosts up to ``envs_per_actor`` envs (made on demand, as the engine's slots need
    them); Ray places the actors (``scheduling_strategy="SPREAD"`` by default) on nodes that
    have the ``resources`` each actor asks for, so e.g. ``resources={"sandbox": 1}`` keeps
    sandboxed envs on nodes started with ``ray start --resources '{"sandbox": 8}'``. A reset or
    a step is one actor call awaited on the engine's event loop: nothing on the driver blocks
    per step, and results travel in Ray's reply, not through the object store.

    **Node loss.** When an actor dies (its node was lost, its process crashed), a replacement
    is started wherever Ray finds room, and each episode that was playing on it is re-run there
    with the same seed, options and actions (the model is not asked again), so the engine
    records it once, with the same result as on one machine. An episode reset without a seed,
    or one whose actor is lost more than ``max_replays`` times, fails with stage ``"env"``
    (:class:`~gemgym.errors.EnvLostError`). An env whose action kills its actor's process (a
    crash in native code) is re-run too and kills the replacement again, so its episode fails
    after ``max_replays`` re-runs, and the episodes sharing that actor are lost with it each
    time: host such envs with ``envs_per_actor=1``.

    Args:
        env: an env id (made with ``make_kwargs``, ``wrappers=`` among them), or a factory
            (pickled to the actors; cloudpickle takes closures).
        env_id: the name of the source's envs (default: the id, or the factory's name).
        envs_per_actor: envs each actor hosts (also its ``max_concurrency``).
        resources: Ray resources each actor reserves (``{"sandbox": 1}``).
        actor_options: more ``.options()`` for the actors (default ``num_cpus=0``,
            ``scheduling_strategy="SPREAD"``).
        max_replays: how many times one call may find its actor lost before the episode fails.
        start_timeout: seconds to wait for a (replacement) actor to start and make an env
            before the episode fails with stage ``"env"`` (no node has the resources).
        address: the cluster to join if Ray is not initialised (see :func:`connect`).

    Attributes:
        replays: episodes re-run after their actor was lost.
        restarts: actors replaced.
    """

    def __init__(
        self,
        env: str | Callable[[], Env[Any, Any]],
        *,
        env_id: str | None = None,
        envs_per_actor: int = 8,
        resources: Mapping[str, float] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        max_replays: int = 3,
        start_timeout: float = 300.0,
        address: str | None = None,
        **make_kwargs: Any,
    ) -> None:
        if envs_per_actor < 1:
            raise ConfigError(f"envs_per_actor must be at least 1, got {envs_per_actor}")
        if isinstance(env, str):
            from gemgym.registry import spec
            from gemgym.vector.base import EnvRecipe

            kwargs = dict(make_kwargs)
            wrappers = tuple(kwargs.pop("wrappers", None) or ())
            factory: Callable[[], Env[Any, Any]] = EnvRecipe(
                spec=spec(env), kwargs=kwargs, wrappers=wrappers
            ).build
            self.env_id = env_id or env
        elif callable(env):
            if make_kwargs:
                raise ConfigError("make_kwargs are only used when env is an id")
            factory = env
            self.env_id = env_id or str(getattr(env, "__name__", ""))
        else:
            raise ConfigError(
                f"a Ray env source is an env id or a factory, got {type(env).__name__}"
            )
        self._ray = ray = connect(address)
        self.envs_per_actor = int(envs_per_actor)
        self.max_replays = int(max_replays)
        self.start_timeout = float(start_timeout)
        self.resources = dict(resources or {})
        for name, amount in self.resources.items():
            if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
                raise ConfigError(
                    f"a Ray resource is NAME=AMOUNT with a number >= 0, got {name}={amount!r} "
                    "(e.g. sandbox=1)"
                )
        options: dict[str, Any] = {"num_cpus": 0, "scheduling_strategy": "SPREAD"}
        options.update(actor_options or {})
        if self.resources:
            options["resources"] = {**options.get("resources", {}), **self.resources}
        options["max_concurrency"] = self.envs_per_actor
        self._factory = factory
        self._cls = ray.remote(_EnvHost).options(**options)
        self._hosts: list[_HostRecord] = []
        self._idle: list[Slot] = []
        self._slots: list[Slot] = []
        self.replays = 0
        self.restarts = 0

    # -- actors ----------------------------------------------------------------------------------
    def _replace(self, host: _HostRecord, generation: int) -> None:
        """Start a replacement for ``host``'s actor, once per loss (``generation`` is the one
        the caller saw die)."""
        if host.generation != generation:
            return  # another episode on it already replaced it
        with contextlib.suppress(Exception):
            self._ray.kill(host.handle)
        host.handle = self._cls.remote(self._factory)
        host.generation += 1
        self.restarts += 1

    async def _started(self, made: Any, lost: int) -> tuple[int, str]:
        try:
            number, env_id = await asyncio.wait_for(made, self.start_timeout)
        except TimeoutError:
            wants = f" with resources {self.resources}" if self.resources else ""
            raise EnvLostError(
                f"no Ray actor{wants} started within {self.start_timeout:g} s"
                + (" after a node was lost" if lost else "")
                + "; add a node that has them (`ray start --address HEAD:6379 --resources "
                "'{\"sandbox\": 8}'`) or check `ray status`"
            ) from None
        return int(number), str(env_id)

    def nodes(self) -> list[str]:
        """The Ray node id of each actor (a blocking call, for checks and tests)."""
        ray = self._ray
        return [str(n) for n in ray.get([h.handle.node.remote() for h in self._hosts])]

    # -- EnvSource -------------------------------------------------------------------------------
    async def acquire(self, run: Callable[..., Any]) -> Slot:
        if self._idle:
            return self._idle.pop()
        host = next((h for h in self._hosts if h.load < self.envs_per_actor), None)
        if host is None:
            host = _HostRecord(self._cls.remote(self._factory))
            self._hosts.append(host)
        host.load += 1
        target = _RayEnv(self, host)
        try:
            await target.make()
        except BaseException:
            host.load -= 1
            raise
        slot = Slot(target, target.env_id, False, run, target.capability)
        self._slots.append(slot)
        return slot

    def release(self, slot: Slot, healthy: bool) -> None:
        if healthy:
            self._idle.append(slot)
            return
        target: _RayEnv = slot.target
        self._slots.remove(slot)
        target.host.load -= 1
        if target.generation == target.host.generation and target.number >= 0:
            with contextlib.suppress(Exception):
                target.host.handle.drop.remote(target.number)

    def close(self) -> None:
        """Close every env (at most 30 s) and kill the actors."""
        ray = self._ray
        hosts, self._hosts = self._hosts, []
        self._idle.clear()
        self._slots.clear()
        if not hosts:
            return
        with contextlib.suppress(Exception):
            ray.wait([h.handle.close.remote() for h in hosts], num_returns=len(hosts), timeout=30)
        for h in hosts:
            with contextlib.suppress(Exception):
                ray.kill(h.handle)
