"""Env I/O never holds the event loop: token rollouts of GSM8K with the Python tool (a real
bubblewrap sandbox, the math grader's worker processes) under a watchdog that fails on any
callback holding the loop longer than 50 ms."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

import pytest

from gemgym.llm.backend import BackendCapabilities, Generation, GenerationRequest, SamplingParams
from gemgym.llm.rollout import arollout_tokens
from helpers.envs import CountingEnv

LIMIT_S = 0.05


class _Scripted:
    """A fake LLM: a Python tool call first, then a boxed answer (tokenised here)."""

    name = "scripted"
    capabilities = BackendCapabilities(token_ids=True, logprobs=False)

    def __init__(self, tok: Any) -> None:
        self.tokenizer = tok

    async def generate(self, request: GenerationRequest) -> Generation:
        turn = int(request.request_id.split("-")[1])
        text = "<python>print(6 * 7)</python>" if turn == 0 else "The answer is \\boxed{42}"
        ids = [*self.tokenizer(text, add_special_tokens=False)["input_ids"]]
        return Generation([*ids, self.tokenizer.eos_token_id], None, text, "stop")

    async def aclose(self) -> None:
        pass


def _watched(coro_fn: Any, caplog: pytest.LogCaptureFixture) -> tuple[Any, list[str]]:
    """Run ``coro_fn()`` on a loop in debug mode, where asyncio logs every callback that runs
    longer than ``slow_callback_duration``; returns the result and those log lines."""
    # The test process's own heap (torch, transformers, pytest) is set aside first: a full
    # collection of it takes ~200 ms and stops every thread, which is not the loop's code.
    gc.collect()
    gc.freeze()
    loop = asyncio.new_event_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = LIMIT_S
    try:
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            result = loop.run_until_complete(coro_fn())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        gc.unfreeze()
    slow = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
    return result, slow


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
@pytest.mark.parametrize("declared", [False, True])
def test_the_watchdog_catches_an_env_that_holds_the_loop(
    tiny: dict[str, tuple[Any, Any]], caplog: pytest.LogCaptureFixture, declared: bool
) -> None:
    """A sync step that sleeps 60 ms without declaring ``blocking_io`` holds the loop and is
    caught; the same step declared blocking runs on the engine's executor and is not."""

    class Sleepy(CountingEnv):
        blocking_io = declared

        def step(self, action: str) -> Any:
            time.sleep(0.06)
            return super().step(action)

    _, tok = tiny["qwen2"]
    eps, slow = _watched(
        lambda: arollout_tokens(
            Sleepy(episode_length=2), _Scripted(tok), episodes=4, batch_size=4, seed=0
        ),
        caplog,
    )
    assert len(eps) == 4 and all(e.finish_reason == "env_end" for e in eps)
    if declared:
        assert not slow, f"a step on the executor held the loop: {slow}"
    else:
        assert slow, "the watchdog did not see a 60 ms step on the loop"


# no reruns: a rerun in the same process finds the modules imported and the pools started,
# and would pass where the first run held the loop (making envs on the loop did just that)
def test_64_gsm8k_episodes_with_the_python_tool_never_hold_the_loop(
    tiny: dict[str, tuple[Any, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    from gemgym.sandbox.bwrap import bwrap_available
    from gemgym.wrappers.tools import python_tool_wrapper

    if not bwrap_available():
        pytest.skip("bubblewrap is not installed")
    _, tok = tiny["qwen2"]
    eps, slow = _watched(
        lambda: arollout_tokens(
            "math:GSM8K",
            _Scripted(tok),
            episodes=64,
            batch_size=64,  # all in flight at once
            seed=0,
            sampling=SamplingParams(max_tokens=64, seed=0),
            wrappers=[python_tool_wrapper(timeout=10)],
        ),
        caplog,
    )
    assert len(eps) == 64 and not any(e.failed for e in eps)
    # the tool ran in the sandbox and the math grader graded every answer
    assert all(e.turns[0].info.get("use_tool") for e in eps)
    assert all("Code execution result: 42" in e.turns[0].next_observation for e in eps)
    assert all("correct" in e.turns[-1].info for e in eps)
    assert not slow, f"callbacks held the event loop longer than {LIMIT_S * 1000:.0f} ms: {slow}"
