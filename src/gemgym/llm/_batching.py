"""Batching for in-process engines: requests that arrive while a batch runs join the next one.

Backends whose engine takes a whole batch in one blocking call (a Hugging Face model, an
in-process vLLM ``LLM``) put each request in a :class:`BatchQueue`; one task of the event loop
runs the batches, each in a worker thread, so the loop keeps stepping envs meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gemgym.errors import BackendError, ConfigError
from gemgym.llm.backend import Generation, GenerationRequest

__all__ = ["BatchQueue"]

RunBatch = Callable[[Sequence[GenerationRequest]], list[Generation]]
"""Generates one batch (blocking; called in a worker thread): one generation per request."""


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[Generation]
    sent: float = field(default_factory=time.perf_counter)


class BatchQueue:
    """Queue requests and run them in batches of at most ``max_batch_size``.

    A batch that raises fails its own requests (``finish_reason="error"``), not the queue.
    """

    def __init__(self, run_batch: RunBatch, max_batch_size: int, owner: str) -> None:
        if max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self._run_batch = run_batch
        self.max_batch_size = max_batch_size
        self._owner = owner
        self._pending: list[_Pending] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self.closed = False

    async def submit(self, request: GenerationRequest) -> Generation:
        """Queue one request; it joins the next batch. Its latency is set on the result."""
        if self.closed:
            raise BackendError(f"this {self._owner} is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Generation] = loop.create_future()
        self._pending.append(_Pending(request, fut))
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = loop.create_task(self._run())
        assert self._wake is not None
        self._wake.set()
        return await fut

    async def _run(self) -> None:
        assert self._wake is not None
        while not self.closed:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = self._pending[: self.max_batch_size]
            del self._pending[: len(batch)]
            try:
                gens = await asyncio.to_thread(self._run_batch, [p.request for p in batch])
            except Exception as e:  # one failed batch fails its requests, not the worker
                msg = f"{type(e).__name__}: {e}"
                gens = [Generation.failed(msg) for _ in batch]
            now = time.perf_counter()
            for p, g in zip(batch, gens, strict=True):
                g.latency_s = now - p.sent
                if not p.future.done():
                    p.future.set_result(g)

    async def aclose(self) -> None:
        """Stop the batching task; pending requests fail. Idempotent."""
        self.closed = True
        for p in self._pending:
            if not p.future.done():
                p.future.set_result(Generation.failed("backend closed"))
        self._pending.clear()
        if self._wake is not None:
            self._wake.set()
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)
