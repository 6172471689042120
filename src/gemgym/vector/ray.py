"""The ``ray`` backend: envs hosted by Ray actors, so one trainer can drive envs on a cluster.

Ray is an optional extra (``pip install "gemgym[ray]"``) imported only when this backend is built.
Each actor hosts a block of envs and steps them in one call; actors are placed by Ray anywhere in
the cluster. If Ray is not initialised yet, ``ray.init()`` is called with its defaults (connect
to ``RAY_ADDRESS`` or start a local cluster); :meth:`RayVectorEnv.close` kills the actors but
leaves Ray running.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gemgym.errors import missing_dependency
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


class _EnvGroup:
    """The body of one Ray actor: a few env slots."""

    def __init__(self, recipes: list[EnvRecipe], mode: AutoresetMode) -> None:
        self.slots = [EnvSlot(r.build(), mode) for r in recipes]

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
    """

    backend = "ray"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        autoreset_mode: AutoresetMode | str | None = None,
        num_actors: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._init_common(recipes, autoreset_mode)
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
        options = dict(actor_options) if actor_options is not None else {"num_cpus": 0}
        remote_cls = ray.remote(_EnvGroup).options(**options)
        self._actors = [
            remote_cls.remote([self.recipes[i] for i in block], self.autoreset_mode)
            for block in blocks
        ]
        try:  # surface construction errors now
            ray.get([actor.ready.remote() for actor in self._actors])
        except BaseException:
            self._closed = True
            self._kill()
            raise

    def _groups(self, items: Sequence[tuple[int, Any]]) -> dict[int, list[tuple[int, int, Any]]]:
        return group_items(self._where, items)

    def _dispatch(self, method: str, items: Sequence[tuple[int, Any]]) -> tuple[list[Any], Any]:
        groups = self._groups(items)
        refs = []
        for k, group in groups.items():
            payload = [(j, *p) if method == "reset" else (j, p) for _, j, p in group]
            refs.append(getattr(self._actors[k], method).remote(payload))
        return list(groups.values()), refs

    @staticmethod
    def _merge(n: int, groups: list[Any], outs: list[list[Any]]) -> list[Any]:
        results: list[Any] = [None] * n
        for group, out in zip(groups, outs, strict=True):
            for (pos, _, _), res in zip(group, out, strict=True):
                results[pos] = res
        return results

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        groups, refs = self._dispatch("step", items)
        return self._merge(len(items), groups, self._ray.get(refs))

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        plan = [(i, (s, o)) for i, s, o in items]
        groups, refs = self._dispatch("reset", plan)
        return self._merge(len(items), groups, self._ray.get(refs))

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        groups, refs = self._dispatch("step", items)
        return self._merge(len(items), groups, list(await asyncio.gather(*refs)))

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        groups, refs = self._dispatch("reset", [(i, (s, o)) for i, s, o in items])
        return self._merge(len(items), groups, list(await asyncio.gather(*refs)))

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
