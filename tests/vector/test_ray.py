"""The ray backend, on a real local Ray cluster with 2 CPUs (started once for this module)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

import gemgym
from helpers.envs import register_bench_envs, worker_pythonpath
from helpers.extras import needs_module

ray = needs_module("ray", "ray")
pytestmark = pytest.mark.slow  # starting Ray takes 4-20 s on 2 busy cores

IDS = ["game:GuessTheNumber-v0-hard", "bench:CpuBound-v0", "game:GuessTheNumber-v0-easy"] * 2
KW: list[dict[str, Any]] = [{}, {"work_iters": 10}, {}] * 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    register_bench_envs()  # bench:* (their actors import helpers.envs: tests/ on their path)
    if ray.is_initialized():  # another test's Ray (a backend starts one on demand)
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": worker_pythonpath()},
    )
    try:
        yield
    finally:
        ray.shutdown()


def trace(venv: gemgym.VectorEnv) -> list[Any]:
    rng = random.Random(3)
    out: list[Any] = [venv.reset(seed=21)]
    for _ in range(25):
        acts = [f"\\boxed{{{rng.randint(1, 50)}}}" for _ in IDS]
        if rng.random() < 0.3:
            res = venv.step({4: acts[4], 1: acts[1]})
        else:
            res = venv.step(acts)
        out.append((res[0], res[1].tolist(), res[2].tolist(), res[3].tolist(), res[4]))
    return out


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_ray_matches_sync(cluster: None, mode: str) -> None:
    with gemgym.make_vec(IDS, vec_kwargs=KW, autoreset_mode=mode) as ref:
        expected = trace(ref)
    with gemgym.make_vec(IDS, vec_kwargs=KW, backend="ray", autoreset_mode=mode) as venv:
        assert venv.backend == "ray"
        assert trace(venv) == expected


def test_ray_async_and_close_kills_actors(cluster: None) -> None:
    venv = gemgym.make_vec(
        "bench:Sleep-v0", 4, backend="ray", sleep_s=0.0, backend_options={"num_actors": 2}
    )

    async def main() -> Any:
        await venv.areset(seed=0)
        together = await venv.astep(["a"] * 4)
        alone = await asyncio.gather(*(venv.handle(i).astep("a") for i in range(4)))
        return together, alone

    together, alone = asyncio.run(main())
    assert all(o.startswith("step 1") for o in together[0])
    assert all(r[0].startswith("step 2") for r in alone)
    # areset awaits the actors' replies; an actor that died meanwhile is replaced
    with gemgym.make_vec("bench:Sleep-v0", 4, sleep_s=0.0) as ref:
        expected = ref.reset(seed=5)[0]
    assert asyncio.run(venv.areset(seed=5))[0] == expected
    dead = venv._actors[0]  # type: ignore[attr-defined]
    ray.kill(dead)
    deadline = time.monotonic() + 30
    while True:  # wait until it is really gone (the kill is asynchronous: a call may get in first)
        try:
            ray.get(dead.ready.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            break
        assert time.monotonic() < deadline, "the killed actor still answers after 30 s"
        time.sleep(0.05)
    assert asyncio.run(venv.areset(seed=5))[0] == expected
    assert venv.restarts == 1  # type: ignore[attr-defined]
    actors = list(venv._actors)  # type: ignore[attr-defined]
    assert len(actors) == 2 and all(ray.get([a.ready.remote() for a in actors]))
    venv.close()
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.ready.remote(), timeout=30)


def test_ray_actor_crash_and_hang_are_isolated(cluster: None) -> None:
    """A dead or hung actor is replaced; its envs come back truncated with worker_error."""
    import functools

    from gemgym.vector import make_vector_env
    from helpers.envs import FaultyEnv

    venv = make_vector_env(
        env_fns=[functools.partial(FaultyEnv, episode_length=50)] * 4,
        backend="ray",
        num_actors=2,
        step_timeout=5.0,
    )
    try:
        venv.reset(seed=0)
        obs, rew, term, trunc, infos = venv.step({0: "crash", 3: "ok"})
        assert trunc.tolist() == [True, False]
        assert "worker_error" in infos[0] and "died" in infos[0]["worker_error"]
        assert venv.restarts == 1  # type: ignore[attr-defined]
        # the rebuilt env 0 was reset with a seed derived from its own (0) and the restart count
        derived = venv._restart_seeds([0], 1)[0]
        assert derived is not None
        assert obs[0] == FaultyEnv(episode_length=50).reset(seed=derived)[0]
        # env 1 lived in the lost actor but was not stepped: its report is owed now
        obs, rew, term, trunc, infos = venv.step(["ok"] * 4)
        assert trunc.tolist() == [False, True, False, False]
        assert "worker_error" in infos[1] and "worker_error" not in infos[0]
        assert obs[0].startswith("step 1")  # env 0 started a fresh episode (same_step)
        obs, rew, term, trunc, infos = venv.step(["ok", "ok", "hang", "ok"])
        assert trunc.tolist() == [False, False, True, True]
        assert "no reply within 5.0 s" in infos[2]["worker_error"]
        with pytest.raises(ValueError, match="asked to raise"):  # the env's own exception
            venv.step(["raise", "ok", "ok", "ok"])
        out = venv.step(["ok"] * 4)
        assert len(out[0]) == 4
    finally:
        venv.close()


def test_connect_says_how_to_reach_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cluster at the address: the error says how to start one and, unless token
    authentication is on here, how to join one that has it on (Ray 2.59+'s default)."""
    from gemgym.errors import ConfigError
    from gemgym.vector.ray import connect

    def refused(**kwargs: Any) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.9:6379")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refused)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(ConfigError, match=r"no Ray cluster answers at '10\.0\.0\.9:6379'") as err:
        connect("10.0.0.9:6379")
    assert "ray start --head --port 6379" in str(err.value)
    assert "set RAY_AUTH_MODE=token here" in str(err.value)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(ConfigError) as err:
        connect("10.0.0.9:6379")
    assert "RAY_AUTH_MODE" not in str(err.value)
