"""The ``thread`` backend: each env steps in a thread of a pool (for envs that wait on I/O)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Sequence
from queue import SimpleQueue
from typing import Any

from gemgym.vector._group import EnvGroup, StepTuple, check_call
from gemgym.vector.base import AutoresetMode, EnvRecipe, ResetItem, VectorEnv

__all__ = ["ThreadVectorEnv"]


class _Batch:
    """One dispatched batch: its results, a countdown, and what to do when it reaches 0
    (set ``done``, or call ``callback`` for an asyncio caller)."""

    __slots__ = ("callback", "done", "error", "lock", "remaining", "results")

    def __init__(self, n: int, callback: Callable[[], None] | None = None) -> None:
        self.results: list[Any] = [None] * n
        self.remaining = n
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.callback = callback
        self.error: BaseException | None = None

    def finish_one(self) -> None:
        with self.lock:
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            if self.callback is not None:
                self.callback()
            else:
                self.done.set()


def _serve(queue: SimpleQueue[Any]) -> None:
    """A dispatch thread: run ``(batch, position, function, args)`` items until ``None``."""
    while True:
        item = queue.get()
        if item is None:
            return
        batch, pos, fn, args = item
        try:
            batch.results[pos] = fn(*args)
        except BaseException as e:
            batch.error = batch.error or e
        batch.finish_one()


class ThreadVectorEnv(VectorEnv):
    """Step every env in its own thread of a pool.

    Use it for envs that wait on I/O (tool calls, servers, sandboxes): while one env waits, the
    others run. For pure-Python CPU-bound envs it is slower than ``sync`` (the GIL serialises
    them); use ``process`` there. Every env has its own random generators, so results do not
    depend on thread scheduling.

    Args:
        recipes: one :class:`EnvRecipe` per env.
        autoreset_mode: see :class:`~gemgym.vector.AutoresetMode`.
        max_workers: threads in the pool (default: one per env, at most 512).
    """

    backend = "thread"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        autoreset_mode: AutoresetMode | str | None = None,
        max_workers: int | None = None,
    ) -> None:
        self._init_common(recipes, autoreset_mode)
        workers = max(1, max_workers if max_workers is not None else min(self.num_envs, 512))
        # Batches go through a queue served by plain threads with one countdown per batch (a
        # future per env, as with ThreadPoolExecutor, costs a sizeable share of a step at large N;
        # measured figures: docs/benchmarks.md).
        self._queue: SimpleQueue[Any] = SimpleQueue()
        self._threads = [
            threading.Thread(
                target=_serve, args=(self._queue,), daemon=True, name=f"gemgym-vec-{k}"
            )
            for k in range(workers)
        ]
        for t in self._threads:
            t.start()
        try:
            envs = self._run([(r.build, ()) for r in self.recipes])
        except BaseException:
            self._stop_threads()
            raise
        self._group = EnvGroup(envs, self.autoreset_mode)

    @property
    def envs(self) -> list[Any]:
        """The env objects (this process holds them)."""
        return list(self._group.envs)

    def _submit(
        self, calls: list[tuple[Callable[..., Any], tuple[Any, ...]]], batch: _Batch
    ) -> None:
        put = self._queue.put
        for pos, (fn, args) in enumerate(calls):
            put((batch, pos, fn, args))

    def _run(self, calls: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
        """Run the calls in the dispatch threads; results in order (the first error raised)."""
        if len(calls) <= 1:  # nothing to overlap (and an empty batch would never finish)
            return [fn(*args) for fn, args in calls]
        batch = _Batch(len(calls))
        self._submit(calls, batch)
        batch.done.wait()
        if batch.error is not None:
            raise batch.error
        return batch.results

    async def _arun(self, calls: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
        """:meth:`_run` for asyncio: the event loop is woken once, when the batch is done."""
        if not calls:
            return []
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not fut.done():
                fut.set_result(None)

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(resolve)

        batch = _Batch(len(calls), wake)
        self._submit(calls, batch)
        await fut
        if batch.error is not None:
            raise batch.error
        return batch.results

    def _reset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        reset = self._group.reset_one
        return self._run([(reset, item) for item in items])

    def _step_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        group = self._group
        group.check([i for i, _ in items])
        return self._run([(group.step_one, item) for item in items])

    def _call_items(self, name: str, args: tuple[Any, ...], indices: list[int] | None) -> list[Any]:
        check_call(name)
        envs = self._group.envs
        chosen = envs if indices is None else [envs[i] for i in indices]
        return self._run([(getattr(env, name), args) for env in chosen])

    async def _areset_items(self, items: list[ResetItem]) -> list[tuple[Any, dict[str, Any]]]:
        reset = self._group.reset_one
        return await self._arun([(reset, item) for item in items])

    async def _astep_items(self, items: list[tuple[int, Any]]) -> list[StepTuple]:
        group = self._group
        group.check([i for i, _ in items])
        return await self._arun([(group.step_one, item) for item in items])

    def _close(self) -> None:
        if sys.is_finalizing():
            # Closed by __del__ at interpreter exit (never closed by the script): the daemon
            # dispatch threads are stopped by now, so waiting on them would hang the exit.
            for env in self._group.envs:
                with contextlib.suppress(Exception):
                    env.close()
            return
        try:
            self._run([(env.close, ()) for env in self._group.envs])
        finally:
            self._stop_threads()

    def _stop_threads(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for t in self._threads:
            t.join(5)
