"""The engine's env threads are started off the event loop: ``Thread.start`` waits until the new
thread runs, which threads busy making envs delay by tens of milliseconds."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from gemgym.episodes import Action, ActRequest, Engine, EpisodeSpec
from helpers.envs import CountingEnv


class _Blocking(CountingEnv):
    blocking_io = True

    def step(self, action: str) -> Any:
        time.sleep(0.01)
        return super().step(action)


class _Policy:
    async def act(self, request: ActRequest) -> Action:
        return Action("x")


def test_env_threads_are_started_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    starters: list[int] = []
    start = threading.Thread.start

    def recording_start(thread: threading.Thread) -> None:
        if thread.name.startswith("gemgym-env"):
            starters.append(threading.get_ident())
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    loop_thread: list[int] = []

    async def play() -> list[Any]:
        loop_thread.append(threading.get_ident())
        engine = Engine(_Policy(), lambda: _Blocking(3), concurrency=16)
        try:
            return await engine.run([EpisodeSpec(k, seed=k) for k in range(32)])
        finally:
            engine.close()

    eps = asyncio.run(play())
    assert len(eps) == 32 and all(e.finish_reason == "env_end" for e in eps)
    assert len(starters) == 16  # one per slot
    assert loop_thread[0] not in starters
