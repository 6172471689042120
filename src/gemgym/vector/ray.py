"""The ``ray`` backend: envs hosted by Ray actors, so one trainer can drive envs on a cluster.

Ray is an optional extra (``pip install "gemgym[ray]"``) imported only when this backend is built.
Each actor hosts a block of envs and steps them in one call; actors are placed by Ray anywhere in
the cluster. If Ray is not initialised yet, ``ray.init()`` is called with its defaults (connect
to ``RAY_ADDRESS`` or start a local cluster); :meth:`RayVectorEnv.close` kills the actors but
leaves Ray running.

Crash isolation works as in the ``process`` backend: an actor that dies (its process crashed or
its node was lost) or takes longer than ``step_timeout`` seconds for a step is killed and
replaced, its envs are rebuilt, and each of them is reported once as ``truncated=True``, reward
0, with ``info["worker_error"]``; the other actors' results come back as usual (and a rebuilt env
that was seeded gets a derived seed, as there). An exception
raised by an env is re-raised as itself (not as Ray's wrapper), and the actor stays up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gemgym.errors import VectorEnvError, missing_dependency
from gemgym.vector.base import (
    AutoresetMode,
    EnvRecipe,
    EnvSlot,
    ResetItem,
    StepTuple,
    VectorEnv,
    group_items,
)

__all__ = ["RayVectorEnv"]


class _ActorLost(Exception):
    """An actor died or timed out; the message says which."""


def _env_error(task_error: Any) -> BaseException:
    """The env's own exception inside Ray's ``RayTaskError`` (or Ray's best stand-in)."""
    cause = task_error.as_instanceof_cause()
    inner = getattr(cause, "cause", None)
    return inner if isinstance(inner, BaseException) else cause


class _EnvGroup:
    """The body of one Ray actor: a few env slots."""

    def __init__(
        self,
        recipes: list[EnvRecipe],
        mode: AutoresetMode,
        needs_reset: bool = False,
        seeds: list[int | None] | None = None,
    ) -> None:
        seeds = seeds or [None] * len(recipes)
        self.slots = [
            EnvSlot(r.build(), mode, needs_reset, s) for r, s in zip(recipes, seeds, strict=True)
        ]

    def ready(self) -> bool:
        return True

    def step(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        return [self.slots[j].step(a) for j, a in items]

    def reset(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        return [self.slots[j].reset(s, o) for j, s, o in items]

    def call(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        return [s.call(name, args) for s in self.slots]

    def close(self) -> None:
        for s in self.slots:
            s.env.close()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise missing_dependency("ray", "ray") from None
    return ray


class RayVectorEnv(VectorEnv):
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

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        autoreset_mode: AutoresetMode | str | None = None,
        num_actors: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
        step_timeout: float | None = None,
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        if step_timeout is not None and step_timeout <= 0:
            raise VectorEnvError(f"step_timeout must be positive seconds, got {step_timeout}")
        self.step_timeout = step_timeout
        self.restarts = 0
        ray = self._ray = _import_ray()
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        n = self.num_envs
        if num_actors is None:
            num_actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
        a = max(1, min(num_actors, n))
        per = math.ceil(n / a)
        blocks = [list(range(s, min(s + per, n))) for s in range(0, n, per)]
        self._where = [(k, j) for k, block in enumerate(blocks) for j in range(len(block))]
        self._blocks = blocks
        self._pending: list[dict[int, StepTuple]] = [{} for _ in blocks]  # reports owed
        options = dict(actor_options) if actor_options is not None else {"num_cpus": 0}
        self._remote_cls = ray.remote(_EnvGroup).options(**options)
        self._actors = [self._new_actor(k) for k in range(len(blocks))]
        try:  # surface construction errors now
            ray.get([actor.ready.remote() for actor in self._actors])
        except BaseException:
            self._closed = True
            self._kill()
            raise

    def _groups(self, items: Sequence[tuple[int, Any]]) -> dict[int, list[tuple[int, int, Any]]]:
        return group_items(self._where, items)

    def _new_actor(
        self, k: int, needs_reset: bool = False, seeds: list[int | None] | None = None
    ) -> Any:
        recipes = [self.recipes[i] for i in self._blocks[k]]
        return self._remote_cls.remote(recipes, self.autoreset_mode, needs_reset, seeds)

    def _replace(self, k: int, reason: str) -> None:
        """Replace a lost actor; owe every one of its envs a truncation report."""
        ray = self._ray
        with contextlib.suppress(Exception):
            ray.kill(self._actors[k])
        self.restarts += 1
        mode = self.autoreset_mode
        seeds = self._restart_seeds(self._blocks[k], self.restarts)
        actor = self._actors[k] = self._new_actor(
            k, needs_reset=mode is AutoresetMode.NEXT_STEP, seeds=seeds
        )
        msg = f"actor {k} was replaced: {reason}; this env's episode was cut short"
        local = range(len(self._blocks[k]))
        pending = self._pending[k]
        if mode is AutoresetMode.SAME_STEP:
            fresh = ray.get(actor.reset.remote([(j, None, None) for j in local]))
            for j, (obs, info) in zip(local, fresh, strict=True):
                full = {**info, "worker_error": msg, "final_obs": None}
                full["final_info"] = {"worker_error": msg}
                pending[j] = (obs, 0.0, False, True, full)
        else:
            ray.get(actor.ready.remote())
            for j in local:
                pending[j] = (None, 0.0, False, True, {"worker_error": msg})

    def _send_steps(
        self, items: list[tuple[int, Any]]
    ) -> tuple[list[Any], list[tuple[int, list[tuple[int, int, Any]], Any]]]:
        """Fill owed reports into the results; send the rest, one call per actor."""
        results: list[Any] = [None] * len(items)
        sent: list[tuple[int, list[tuple[int, int, Any]], Any]] = []
        for k, group in self._groups(items).items():
            pending = self._pending[k]
            todo = []
            for pos, j, action in group:
                owed = pending.pop(j, None)
                if owed is not None:
                    results[pos] = owed
                else:
                    todo.append((pos, j, action))
            if todo:
                sent.append((k, todo, self._actors[k].step.remote([(j, a) for _, j, a in todo])))
        return results, sent

    def _fill(
        self, results: list[Any], k: int, todo: list[tuple[int, int, Any]], out: Any
    ) -> BaseException | None:
        """Put actor ``k``'s reply (or its failure) into the results; an env error is returned."""
        ray = self._ray
        if isinstance(out, (_ActorLost, ray.exceptions.RayActorError)):
            reason = str(out) if isinstance(out, _ActorLost) else "the actor died"
            self._replace(k, reason)
            out = [self._pending[k].pop(j) for _, j, _ in todo]
        elif isinstance(out, ray.exceptions.RayTaskError):  # the env raised
            return _env_error(out)
        elif isinstance(out, BaseException):
            return out
        for (pos, _, _), res in zip(todo, out, strict=True):
            results[pos] = res
        return None

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        ray = self._ray
        results, sent = self._send_steps(items)
        deadline = None if self.step_timeout is None else time.monotonic() + self.step_timeout
        error: BaseException | None = None
        for k, todo, ref in sent:
            out: Any
            try:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                out = ray.get(ref, timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
                out = _ActorLost(f"no reply within {self.step_timeout} s while stepping")
            except Exception as e:  # the actor died or an env raised
                out = e
            error = self._fill(results, k, todo, out) or error
        if error is not None:
            raise error
        return results

    def _send_resets(self, items: list[ResetItem]) -> list[tuple[int, Any, Any, Any]]:
        groups = self._groups([(i, (s, o)) for i, s, o in items])
        sent = []
        for k, group in groups.items():
            payload = [(j, s, o) for _, j, (s, o) in group]
            sent.append((k, group, payload, self._actors[k].reset.remote(payload)))
        return sent

    def _take_reset(self, results: list[Any], k: int, group: Any, payload: Any, out: Any) -> None:
        """Put actor ``k``'s reset reply into the results; a dead actor is replaced and asked
        again, an env's exception is raised."""
        ray = self._ray
        if isinstance(out, ray.exceptions.RayActorError):  # replace it and reset there
            self._replace(k, "the actor died")
            out = ray.get(self._actors[k].reset.remote(payload))
        elif isinstance(out, ray.exceptions.RayTaskError):
            raise _env_error(out) from None
        elif isinstance(out, BaseException):
            raise out
        for (pos, j, _), res in zip(group, out, strict=True):
            self._pending[k].pop(j, None)
            results[pos] = res

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        results: list[Any] = [None] * len(items)
        for k, group, payload, ref in self._send_resets(items):
            try:
                out = self._ray.get(ref)
            except Exception as e:  # handled (or raised) by _take_reset
                out = e
            self._take_reset(results, k, group, payload, out)
        return results

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        if self.step_timeout is not None:  # timeouts are kept by the blocking path
            return await asyncio.get_running_loop().run_in_executor(None, self._step_items, items)
        results, sent = self._send_steps(items)
        outs = await asyncio.gather(*(ref for _, _, ref in sent), return_exceptions=True)
        error: BaseException | None = None
        for (k, todo, _), out in zip(sent, outs, strict=True):
            error = self._fill(results, k, todo, out) or error
        if error is not None:
            raise error
        return results

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        results: list[Any] = [None] * len(items)
        sent = self._send_resets(items)
        outs = await asyncio.gather(*(ref for *_, ref in sent), return_exceptions=True)
        for (k, group, payload, _), out in zip(sent, outs, strict=True):
            self._take_reset(results, k, group, payload, out)
        return results

    def _call_items(self, name: str, args: tuple[Any, ...]) -> list[Any]:
        outs = self._ray.get([actor.call.remote(name, args) for actor in self._actors])
        return [x for out in outs for x in out]

    def _kill(self) -> None:
        actors = list(getattr(self, "_actors", []))
        for actor in actors:
            with contextlib.suppress(Exception):  # already dead
                self._ray.kill(actor)
        # ray.kill is asynchronous: wait (at most 10 s) until every actor is really gone, so that
        # nothing of this vector env runs after close() returns.
        deadline = time.monotonic() + 10.0
        for actor in actors:
            while time.monotonic() < deadline:
                try:
                    self._ray.get(
                        actor.ready.remote(), timeout=max(0.1, deadline - time.monotonic())
                    )
                except Exception:  # RayActorError: it is gone (or the deadline passed)
                    break
                time.sleep(0.05)
        self._actors = []

    def _close(self) -> None:
        try:
            self._ray.get([actor.close.remote() for actor in self._actors], timeout=30)
        except Exception:  # pragma: no cover - a dead actor has nothing left to close
            pass
        finally:
            self._kill()
