"""Batching for in-process engines: requests that arrive while a batch runs join the next one.

Backends whose engine takes a whole batch in one blocking call (a Hugging Face model, an
in-process vLLM ``LLM``) put each request in a :class:`BatchQueue`; one task of the event loop
runs the batches, each in a worker thread, so the loop keeps stepping envs meanwhile.
:class:`BatchedBackend` is what such backends share: name, capabilities, the request checks
and closing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gemgym.errors import BackendError, ConfigError
from gemgym.llm.backend import BackendCapabilities, Generation, GenerationRequest

__all__ = ["BatchQueue", "BatchedBackend"]

RunBatch = Callable[[Sequence[GenerationRequest]], list[Generation]]
"""Generates one batch (blocking; called in a worker thread): one generation per request."""


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[Generation]
    sent: float = field(default_factory=time.perf_counter)


class BatchQueue:
    """Queue requests and run them in batches of at most ``max_batch_size``.

    A batch that raises is split: each of its requests is tried alone, and only those that
    raise again fail (``finish_reason="error"``); the queue goes on.
    """

    def __init__(self, run_batch: RunBatch, max_batch_size: int) -> None:
        if max_batch_size < 1:
            raise ConfigError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self._run_batch = run_batch
        self.max_batch_size = max_batch_size
        self._pending: list[_Pending] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.closed = False

    async def submit(self, request: GenerationRequest) -> Generation:
        """Queue one request; it joins the next batch. Its latency is set on the result."""
        if self.closed:
            raise BackendError("the backend is closed")
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
            gens = await self._in_thread(self._generate, [p.request for p in batch])
            now = time.perf_counter()
            for p, g in zip(batch, gens, strict=True):
                g.latency_s = now - p.sent
                if not p.future.done():
                    p.future.set_result(g)

    async def _in_thread(self, fn: Callable[..., list[Generation]], *args: Any) -> list[Generation]:
        """``fn(*args)`` on the queue's own thread (not asyncio's default pool, which env
        tools may share), so model batches never wait behind other work."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="gemgym-model")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """One batch; a batch that raises is split and each request tried alone, so one bad
        request fails alone (blocking: runs on the queue's thread)."""
        try:
            return self._run_batch(requests)
        except Exception as e:
            if len(requests) == 1:
                return [Generation.failed(f"{type(e).__name__}: {e}")]
        out: list[Generation] = []
        for r in requests:
            try:
                out.extend(self._run_batch([r]))
            except Exception as e:  # this request itself fails
                out.append(Generation.failed(f"{type(e).__name__}: {e}"))
        return out

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
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None


class BatchedBackend:
    """The shared part of the in-process backends: a subclass sets ``_name`` and ``_queue``
    and generates with :meth:`_submit`."""

    _name: str
    _queue: BatchQueue

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def capabilities(self) -> BackendCapabilities:
        """Token ids in and out, log-probs, seeds; no images."""
        return BackendCapabilities(token_ids=True, logprobs=True, images=False, seeds=True)

    async def _submit(self, request: GenerationRequest, max_len: int | None) -> Generation:
        """Check ``request`` and queue it. A prompt of ``max_len`` tokens or more gets no
        tokens and ``finish_reason="length"`` (the rollout ends the episode as truncated by the
        context) instead of failing its batch."""
        owner = type(self).__name__
        if self._queue.closed:
            raise BackendError(f"this {owner} is closed")
        if request.images:
            raise BackendError(
                f"{owner} is text-only; serve a vision model with vLLM or SGLang and use a "
                "server backend for image observations"
            )
        if request.prompt_ids is None:
            raise BackendError(f"{owner} needs prompt_ids")
        n = len(request.prompt_ids)
        if n == 0:
            raise BackendError("empty prompt")
        if max_len is not None and n >= max_len:
            return Generation([], [], "", "length", prompt_tokens=n)
        return await self._queue.submit(request)

    async def aclose(self) -> None:
        """Stop the batching task; pending requests fail (the model itself is left as is)."""
        await self._queue.aclose()
