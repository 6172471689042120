"""BatchQueue: batches of concurrent requests, a failed batch split, its own model thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from gemgym.llm._batching import BatchQueue
from gemgym.llm.backend import Generation, GenerationRequest, SamplingParams

POISON = 13


def _request(first: int) -> GenerationRequest:
    return GenerationRequest([first, 2, 3], [], SamplingParams(max_tokens=4))


class _Engine:
    """Echoes each prompt's first token; a batch holding the poison token raises as a whole."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[str] = set()

    def __call__(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        firsts = [r.prompt_ids[0] if r.prompt_ids else -1 for r in requests]
        self.batches.append(firsts)
        self.threads.add(threading.current_thread().name)
        if POISON in firsts:
            raise RuntimeError("CUDA error: device-side assert triggered")
        return [Generation([f], [0.0], str(f), "stop") for f in firsts]


async def _submit_all(queue: BatchQueue, firsts: list[int]) -> list[Generation]:
    try:
        return await asyncio.gather(*(queue.submit(_request(f)) for f in firsts))
    finally:
        await queue.aclose()


def test_a_poisoned_batch_fails_only_the_poison_request() -> None:
    engine = _Engine()
    firsts = [1, 2, POISON, 4]
    gens = asyncio.run(_submit_all(BatchQueue(engine, max_batch_size=8), firsts))
    for f, g in zip(firsts, gens, strict=True):
        if f == POISON:
            assert g.finish_reason == "error"
            assert g.error is not None and "device-side assert" in g.error
        else:
            assert (g.finish_reason, g.token_ids, g.error) == ("stop", [f], None)
    assert engine.batches[0] == firsts  # one batch first, then each request alone
    assert sorted(map(tuple, engine.batches[1:])) == [(f,) for f in sorted(firsts)]


def test_batches_run_on_the_queues_own_thread_not_asyncios_pool() -> None:
    engine = _Engine()
    queue = BatchQueue(engine, max_batch_size=2)
    gens = asyncio.run(_submit_all(queue, [1, 2, 3, 4, 5]))
    assert [g.token_ids for g in gens] == [[1], [2], [3], [4], [5]]
    assert all(len(b) <= 2 for b in engine.batches)
    assert len(engine.threads) == 1
    assert next(iter(engine.threads)).startswith("gemgym-model")
    assert queue._executor is None  # aclose shut it down


def test_a_batch_of_one_that_raises_is_not_retried() -> None:
    engine = _Engine()
    (gen,) = asyncio.run(_submit_all(BatchQueue(engine, max_batch_size=4), [POISON]))
    assert gen.finish_reason == "error"
    assert engine.batches == [[POISON]]
