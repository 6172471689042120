"""The episode engine on a real local multi-node Ray cluster (a head and two worker nodes,
started once for this module): envs placed by Ray resources, a node killed mid-run, every
episode recorded once with the results of a one-machine run of the same seeds."""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gemgym.episodes import Action, ActRequest, Engine, EnvSource, Episode, EpisodeSpec
from helpers.envs import worker_pythonpath
from helpers.extras import needs_module

ray = needs_module("ray", "ray")
cluster_utils = needs_module("ray.cluster_utils", "ray")
pytestmark = pytest.mark.slow  # three Ray nodes start in about 15 s on 2 busy cores

GUESS = "game:GuessTheNumber-v0-easy"


class Guess:
    """A scripted policy: a guess drawn from the turn's sampling seed (the same on any node)."""

    async def act(self, request: ActRequest) -> Action:
        return Action(f"\\boxed{{{random.Random(request.seed).randint(1, 10)}}}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, list[Any]]]:
    c = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            # a dead node is noticed within a second or two
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 2},
        },
    )
    # only the worker nodes declare the resource the envs ask for: none is placed on the head
    workers = [c.add_node(num_cpus=1, resources={"sandbox": 8}) for _ in range(2)]
    # FaultyEnv's actors import helpers.envs: tests/ on their path
    if ray.is_initialized():  # another test's Ray (a backend starts one on demand)
        ray.shutdown()
    ray.init(address=c.address, log_to_driver=False, runtime_env={"env_vars": worker_pythonpath()})
    c.wait_for_nodes()
    try:
        yield c, workers
    finally:
        ray.shutdown()
        c.shutdown()
        # the cluster leaves its address in /tmp/ray/ray_current_cluster, and a later plain
        # ray.init() in this machine's tests would try to join the dead cluster (minutes of
        # GCS timeouts) instead of starting its own
        current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        with contextlib.suppress(OSError):
            if current.read_text().strip() == c.address:
                current.unlink()


def _records(episodes: list[Episode]) -> dict[int, dict[str, Any]]:
    return {e.index: e.to_dict() for e in episodes}


def _one_machine(specs: list[EpisodeSpec]) -> dict[int, dict[str, Any]]:
    engine = Engine(Guess(), GUESS, concurrency=8, seed=11)
    try:
        return _records(asyncio.run(engine.run(specs)))
    finally:
        engine.close()


def test_512_episodes_over_two_nodes_one_killed_mid_run(cluster: tuple[Any, list[Any]]) -> None:
    c, (doomed, survivor) = cluster
    specs = [EpisodeSpec(k, seed=5000 + k) for k in range(512)]
    source: Any = EnvSource.ray(GUESS, envs_per_actor=8, resources={"sandbox": 1})
    seen: dict[str, Any] = {}

    class KillMidRun(Guess):
        """A quarter in, at turn 2 of an episode played on the doomed node, removes that node
        and waits until Ray reports its actors dead: that episode (and any other there) is
        then lost mid-episode."""

        async def act(self, request: ActRequest) -> Action:
            if request.episode.index >= 128 and request.turn == 2 and not seen:
                host = request.env._call.__self__.host  # type: ignore[attr-defined]
                nodes = source.nodes()
                if nodes[source._hosts.index(host)] == doomed.node_id:
                    seen["before"] = nodes
                    seen["at_episode"] = request.episode.index
                    c.remove_node(doomed)
                    deadline = time.monotonic() + 60
                    while True:
                        try:
                            await host.handle.node.remote()
                        except ray.exceptions.RayActorError:
                            break
                        assert time.monotonic() < deadline, "the removed node's actor answers"
                        await asyncio.sleep(0.05)
            return await super().act(request)

    engine = Engine(KillMidRun(), source, concurrency=32, seed=11)

    async def play() -> list[Episode]:
        return [ep async for ep in engine.play(specs)]

    t0 = time.perf_counter()
    try:
        episodes = asyncio.run(play())
        after = source.nodes()
    finally:
        engine.close()
    wall = time.perf_counter() - t0

    # the actors were spread over both worker nodes (the head has no "sandbox")
    before = seen["before"]
    assert len(before) == 4 and set(before) == {doomed.node_id, survivor.node_id}
    # every lost actor was replaced on the survivor, and the episodes in flight there re-run
    assert after == [survivor.node_id] * 4
    assert source.restarts == before.count(doomed.node_id)
    assert source.replays >= 1
    # every planned episode is recorded once, none failed, none twice
    assert sorted(e.index for e in episodes) == list(range(512))
    assert not [e for e in episodes if e.failed]
    # with the same results as one machine playing the same seeds
    assert _records(episodes) == _one_machine(specs)
    assert wall < 120


def test_an_actor_lost_mid_episode(cluster: tuple[Any, list[Any]]) -> None:
    """A seeded episode is re-run on the replacement actor with the same result; one reset
    without a seed cannot be, and fails with stage "env", saying why."""
    source: Any = EnvSource.ray(GUESS, envs_per_actor=2, resources={"sandbox": 1})
    killed: list[Any] = []
    both_at_turn_one = asyncio.Event()

    class KillAtTurnOne(Guess):
        """Guesses out of range first (no episode ends at turn 0); when both episodes are at
        turn 1, kills their actor."""

        async def act(self, request: ActRequest) -> Action:
            if request.turn == 0:
                return Action("\\boxed{11}")
            if request.turn == 1 and not both_at_turn_one.is_set():
                killed.append(request.slot)
                if len(killed) < 2:
                    await both_at_turn_one.wait()
                else:
                    handle = source._hosts[0].handle
                    ray.kill(handle)
                    deadline = time.monotonic() + 30
                    while True:  # the kill is asynchronous: wait until it is really gone
                        try:
                            await handle.node.remote()
                        except ray.exceptions.RayActorError:
                            break
                        assert time.monotonic() < deadline, "the killed actor still answers"
                        await asyncio.sleep(0.05)
                    both_at_turn_one.set()
            return await super().act(request)

    specs = [EpisodeSpec(0, seed=77), EpisodeSpec(1, seed=None)]
    engine = Engine(KillAtTurnOne(), source, concurrency=2, seed=11)
    try:
        seeded, unseeded = asyncio.run(engine.run(specs))
    finally:
        engine.close()
    assert len(killed) == 2 and source.restarts == 1 and source.replays == 1
    engine = Engine(KillAtTurnOne(), GUESS, concurrency=1, seed=11)
    both_at_turn_one.set()
    try:
        (reference,) = asyncio.run(engine.run(specs[:1]))
    finally:
        engine.close()
    assert seeded.to_dict() == reference.to_dict()
    assert unseeded.finish_reason == "error" and unseeded.error_stage == "env"
    assert "EnvLostError" in (unseeded.error or "")
    assert "without a seed" in (unseeded.error or "")


def test_gemgym_eval_on_the_cluster(cluster: tuple[Any, list[Any]], tmp_path: Path) -> None:
    """``gemgym eval --ray`` plays the envs in actors on the nodes with the resource and
    records what a run in this process records."""
    import json

    from gemgym.cli import main
    from helpers.scripted_server import ScriptedChatServer

    def reply(body: dict[str, Any]) -> str:
        return f"\\boxed{{{body.get('seed', 0) % 10 + 1}}}"

    def records(run: Path) -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines() if x]
        for r in lines:
            r.pop("wall_s")
            r.pop("latency_s")
            for t in r["transitions"]:
                t.pop("latency_s", None)
                t.pop("env_s", None)
        return sorted(lines, key=lambda r: (r["env"], r["task"], r["sample"]))

    with ScriptedChatServer(reply) as server:
        args = ["eval", GUESS, "game:Hangman-v0-easy", "--model", "m", "--base-url", server.url,
                "--quiet", "--tasks", "8", "--n", "2", "--concurrency", "8"]  # fmt: skip
        assert main([*args, "--out", str(tmp_path / "here")]) == 0
        on_ray = [*args, "--out", str(tmp_path / "ray"), "--ray", "auto"]
        assert main([*on_ray, "--ray-resource", "sandbox=1"]) == 0
    ray_records = records(tmp_path / "ray")
    assert len(ray_records) == 2 * 8 * 2
    assert ray_records == records(tmp_path / "here")
    run = json.loads((tmp_path / "ray" / "summary.json").read_text())["run"]
    assert run["ray"] == "auto"


def test_an_env_that_raises_or_crashes_its_actor(cluster: tuple[Any, list[Any]]) -> None:
    """An env's own exception is the episode's step error (the actor stays up); an action
    that kills its actor each time it is played ends its episode with stage "env" after
    ``max_replays`` re-runs (one env per actor here: envs sharing the actor would be lost with
    it each time), and the other episodes end as on one machine."""
    import functools

    from helpers.envs import FaultyEnv

    class Faults:
        async def act(self, request: ActRequest) -> Action:
            if request.turn == 1 and request.episode.index in (0, 1):
                return Action(["raise", "crash"][request.episode.index])
            return Action("ok")

    factory = functools.partial(FaultyEnv, episode_length=4)
    source: Any = EnvSource.ray(factory, envs_per_actor=1, max_replays=2)
    specs = [EpisodeSpec(k, seed=k) for k in range(4)]
    engine = Engine(Faults(), source, concurrency=4)
    try:
        raised, crashed, *fine = asyncio.run(engine.run(specs))
    finally:
        engine.close()
    assert raised.error_stage == "step" and "FaultyEnv was asked to raise" in (raised.error or "")
    assert crashed.error_stage == "env" and "lost 3 times" in (crashed.error or "")
    assert source.restarts == 3
    local = Engine(Faults(), factory, concurrency=4)
    try:
        expected = asyncio.run(local.run(specs[2:]))  # (a crash here would end pytest)
    finally:
        local.close()
    assert [e.to_dict() for e in fine] == [e.to_dict() for e in expected]


def test_no_blocking_ray_call_on_the_driver_per_step(
    cluster: tuple[Any, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot path: every reset and step is an actor call awaited on the engine's loop; the
    driver never blocks in ``ray.get``/``ray.wait`` while episodes play (only closing the
    source waits for its actors)."""
    blocking: list[str] = []
    for name in ("get", "wait"):
        real = getattr(ray, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            blocking.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(ray, name, counted)
    source: Any = EnvSource.ray(GUESS, envs_per_actor=8, resources={"sandbox": 1})
    engine = Engine(Guess(), source, concurrency=16, seed=11)
    specs = [EpisodeSpec(k, seed=900 + k) for k in range(64)]
    try:
        episodes = asyncio.run(engine.run(specs))
        assert blocking == []
    finally:
        engine.close()
    assert sum(len(e.turns) for e in episodes) >= 128 and not [e for e in episodes if e.failed]
    assert _records(episodes) == _one_machine(specs)


def test_served_envs_from_ray_actors_share_a_pool_per_actor(
    cluster: tuple[Any, list[Any]],
) -> None:
    """OpenEnvEnv on an endpoint pool, hosted in Ray actors: each actor unpickles the pool once
    (its envs share it) and spreads its sessions over the servers; the records are a
    one-machine run's."""
    import functools

    needs_module("openenv.core.env_server", "openenv")
    from gemgym.integrations.openenv import OpenEnvEnv
    from gemgym.integrations.openenv_pool import EndpointPool
    from gemgym.serving import Limits
    from gemgym.serving.env_server import EnvServer
    from gemgym.serving.stack import Runner

    apps = [EnvServer(GUESS) for _ in range(2)]
    runners = [Runner(app, host="127.0.0.1", port=0, limits=Limits()).start() for app in apps]
    try:
        pool = EndpointPool([f"http://127.0.0.1:{r.port}" for r in runners])
        factory = functools.partial(OpenEnvEnv, pool)
        source: Any = EnvSource.ray(factory, envs_per_actor=4, resources={"sandbox": 1})
        engine = Engine(Guess(), source, concurrency=8, seed=11)
        specs = [EpisodeSpec(k, seed=700 + k) for k in range(32)]
        try:
            episodes = asyncio.run(engine.run(specs))
            assert [len(app.sessions) for app in apps] == [4, 4]
        finally:
            engine.close()
    finally:
        for r in runners:
            r.stop()
    assert not [e for e in episodes if e.failed]

    def outcome(record: dict[str, Any]) -> tuple[Any, ...]:
        """What was played and paid (a served observation carries the model's view)."""
        turns = [(t["action"], t["reward"], t["terminated"]) for t in record["turns"]]
        return (record["seed"], record["finish_reason"], record["return"], turns)

    local = _one_machine(specs)
    assert {k: outcome(r) for k, r in _records(episodes).items()} == {
        k: outcome(r) for k, r in local.items()
    }
