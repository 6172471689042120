"""Driving the engine from sync code: :func:`run_sync` iterates an async generator on a private
event loop (in a thread of its own when the caller already runs one)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(agen_factory: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate an async generator from sync code, on a private event loop (in a thread of its
    own when the caller already runs one), yielding its items as they come."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        yield from _iterate_here(agen_factory)
        return
    yield from _iterate_in_thread(agen_factory)


def _iterate_here(agen_factory: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    loop = asyncio.new_event_loop()
    agen = agen_factory()
    try:
        while True:
            try:
                item = loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
            yield item
    finally:
        with contextlib.suppress(Exception):
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                loop.run_until_complete(aclose())
        left = asyncio.all_tasks(loop)  # e.g. a backend's batching task
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@dataclass
class _Handoff:
    items: list[Any] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None
    cond: threading.Condition = field(default_factory=threading.Condition)


def _iterate_in_thread(agen_factory: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    box = _Handoff()
    stop = threading.Event()

    def pump() -> None:
        try:
            for item in _iterate_here(agen_factory):
                with box.cond:
                    box.items.append(item)
                    box.cond.notify()
                if stop.is_set():
                    return
        except BaseException as e:
            box.error = e
        finally:
            with box.cond:
                box.done = True
                box.cond.notify()

    thread = threading.Thread(target=pump, name="gemgym-episodes", daemon=True)
    thread.start()
    try:
        while True:
            with box.cond:
                while not box.items and not box.done:
                    box.cond.wait()
                if box.items:
                    item = box.items.pop(0)
                elif box.error is not None:
                    raise box.error
                else:
                    return
            yield item
    finally:
        stop.set()
