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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gemgym.errors import missing_dependency
from gemgym.vector._group import EnvGroup, StepTuple, build_all
from gemgym.vector._hosted import Host, HostedVectorEnv, HostLost
from gemgym.vector.base import AutoresetMode, EnvRecipe, ResetItem

__all__ = ["RayVectorEnv"]


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
