"""The endpoint pool: two real ``gemgym serve`` servers on loopback, one killed mid-run and
started again; episodes on it fail with stage "env", resets go to the other, and the pool uses
it again once it is back."""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.extras import needs_module

needs_module("openenv.core.env_server", "openenv")
pytestmark = pytest.mark.openenv

from gemgym.episodes import Action, ActRequest, Engine, EnvSource, Episode, EpisodeSpec  # noqa: E402
from gemgym.errors import ConfigError, EnvLostError  # noqa: E402
from gemgym.integrations.openenv import OpenEnvEnv  # noqa: E402
from gemgym.integrations.openenv_pool import EndpointPool, is_full, is_lost  # noqa: E402
from gemgym.prompting import model_view  # noqa: E402
from helpers.net import free_port, wait_for_port  # noqa: E402

GUESS = "game:GuessTheNumber-v0-easy"
SRC = str(Path(__file__).parents[2] / "src")


class Server:
    """``gemgym serve GUESS`` in its own process, on a fixed port (so it can come back)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gemgym", "serve", GUESS, "--port", str(self.port)],
            env={**os.environ, "PYTHONPATH": SRC},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        wait_for_port(self.port, process=self.proc, what="gemgym serve")

    def kill(self) -> None:
        """SIGKILL: the server vanishes without closing its sessions."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    a, b = Server(), Server()
    try:
        a.start()
        b.start()
        yield a, b
    finally:
        a.stop()
        b.stop()


class Guess:
    """Out of range first (no episode ends at turn 0), then a guess from the turn's seed."""

    async def act(self, request: ActRequest) -> Action:
        if request.turn == 0:
            return Action("\\boxed{11}")
        return Action(f"\\boxed{{{random.Random(request.seed).randint(1, 10)}}}")


def _local(specs: list[EpisodeSpec]) -> dict[int, dict[str, Any]]:
    """The episodes played in this process, with each observation as a server sends it (the
    model's view)."""
    engine = Engine(Guess(), GUESS, concurrency=4, seed=3)
    try:
        episodes = asyncio.run(engine.run(specs))
    finally:
        engine.close()
    out = {}
    for ep in episodes:
        d = _comparable(ep)
        d["initial_observation"] = model_view(ep.initial_observation, ep.reset_info)
        info = ep.reset_info
        for turn, t in zip(d["turns"], ep.turns, strict=True):
            turn["observation"] = model_view(t.observation, info)
            turn["next_observation"] = model_view(t.next_observation, t.info)
            info = t.info
        out[ep.index] = d
    return out


def _comparable(ep: Episode) -> dict[str, Any]:
    """An episode's record without what only a remote env adds (the whole observation in
    ``info``)."""
    d = ep.to_dict()
    d.pop("env_id")
    for turn in d["turns"]:
        turn["info"].pop("observation", None)
    d["reset_info"].pop("observation", None)
    return d


def _sessions(pool: EndpointPool) -> list[int]:
    return [e["sessions"] for e in pool.status()]


def test_a_server_lost_mid_run_and_back(servers: tuple[Server, Server]) -> None:
    a, b = servers
    # no doubling of the retry delay: however many resets tried a while it was down, it is
    # tried again half a second after it is back (a loaded machine made the doubled delay
    # outlast the sleep below)
    pool = EndpointPool([a.url, b.url], retry_s=0.5, max_retry_s=0.5)
    at_turn_one: list[int] = []
    all_at_turn_one = asyncio.Event()

    class KillAAtTurnOne(Guess):
        """When the first four episodes are all at turn 1 (two on each server), kill a."""

        async def act(self, request: ActRequest) -> Action:
            if request.turn == 1 and request.episode.index < 4:
                at_turn_one.append(request.episode.index)
                if len(at_turn_one) < 4:
                    await all_at_turn_one.wait()
                else:
                    assert _sessions(pool) == [2, 2]  # sticky sessions, spread evenly
                    a.kill()
                    all_at_turn_one.set()
            return await super().act(request)

    source = EnvSource.make(OpenEnvEnv(pool))  # copies share the pool
    engine = Engine(KillAAtTurnOne(), source, concurrency=4, seed=3)
    specs = [EpisodeSpec(k, seed=200 + k) for k in range(12)]
    try:
        first = asyncio.run(engine.run(specs))
        # the two episodes on a are the episode's errors, stage "env", naming the server
        lost = [e for e in first if e.failed]
        assert len(lost) == 2 and {e.index for e in lost} < {0, 1, 2, 3}
        for e in lost:
            assert e.error_stage == "env"
            assert (e.error or "").startswith("EnvLostError")
            assert a.url in (e.error or "") and "mid-episode" in (e.error or "")
        # every other episode was played, on b, with the result of an in-process run
        played = {e.index: _comparable(e) for e in first if not e.failed}
        expected = _local(specs)
        assert played == {k: expected[k] for k in played}
        assert len(played) == 10
        status = pool.status()
        assert not status[0]["up"] and "Connection" in (status[0]["error"] or "")
        assert _sessions(pool) == [0, 4]

        # a comes back: once its retry delay is over, resets move sessions to it until even
        a.start()
        time.sleep(1.0)
        again = [EpisodeSpec(100 + k, seed=300 + k) for k in range(8)]
        second = asyncio.run(engine.run(again))
        assert not [e for e in second if e.failed]
        assert {e.index: _comparable(e) for e in second} == _local(again)
        assert [e["up"] for e in pool.status()] == [True, True]
        assert _sessions(pool) == [2, 2]
    finally:
        engine.close()
    assert _sessions(pool) == [0, 0]


def test_a_failed_reset_goes_to_the_other_server(servers: tuple[Server, Server]) -> None:
    a, b = servers
    pool = EndpointPool([a.url, b.url], retry_s=30.0)
    one, two = OpenEnvEnv(pool), OpenEnvEnv(pool)
    obs, _ = one.reset(seed=5)
    two.reset(seed=6)
    assert _sessions(pool) == [1, 1]  # the least loaded first
    a.kill()
    # one's session on a is gone: its next reset is retried on b, the same episode
    assert one.reset(seed=5)[0] == obs
    assert _sessions(pool) == [0, 2] and not pool.status()[0]["up"]
    # a pool that does not know a is down: its first reset is refused there, then played on b
    fresh = EndpointPool([a.url, b.url])
    three = OpenEnvEnv(fresh)
    assert three.reset(seed=5)[0] == obs
    assert _sessions(fresh) == [0, 1] and not fresh.status()[0]["up"]
    three.close()
    # a pickled copy (in a worker process, a Ray actor) shares its process's pool
    copy = pickle.loads(pickle.dumps(one))
    assert copy.pool is pool
    copy.close()
    # a vector env over the pool: its envs skip a (down) and play on b
    from gemgym.vector import make_vector_env

    venv = make_vector_env(env_fns=[functools.partial(OpenEnvEnv, pool)] * 3, backend="thread")
    venv.reset(seed=0)
    assert _sessions(pool) == [0, 5]
    venv.close()
    # ... and a process vector env: each worker process unpickles its own copy of the pool
    # (which hung there once: the copy was made under the lock it registers with), finds a
    # down on its own and plays on b
    venv = make_vector_env(env_fns=[functools.partial(OpenEnvEnv, pool)] * 2, backend="process")
    try:
        assert venv.reset(seed=5)[0][0] == obs
        assert httpx.get(f"{b.url}/health").json()["sessions"] == 2 + 2
    finally:
        venv.close()
    two.close()
    one.close()
    assert _sessions(pool) == [0, 0]
    b.kill()
    with pytest.raises(EnvLostError, match="no endpoint of the pool") as info:
        one.reset(seed=5)
    assert a.url in str(info.value) and b.url in str(info.value)


def test_pool_arguments_and_what_counts_as_lost() -> None:
    with pytest.raises(ConfigError, match="http"):
        EndpointPool(["localhost:8000"])
    with pytest.raises(ConfigError, match="twice"):
        EndpointPool(["http://a:1", "http://a:1"])
    with pytest.raises(ConfigError, match="at least one"):
        EndpointPool([])
    assert is_lost(ConnectionRefusedError()) and is_lost(TimeoutError())
    assert is_lost(RuntimeError("Server error: server full: 8 of 8 (code: CAPACITY_REACHED)"))
    assert not is_lost(RuntimeError("Server error: bad options (code: EXECUTION_ERROR)"))
    # full is a kind of lost (the reset goes elsewhere), but the server is up
    assert is_full(RuntimeError("Server error: server full: 8 of 8 (code: CAPACITY_REACHED)"))
    assert not is_full(ConnectionRefusedError()) and not is_full(TimeoutError())
