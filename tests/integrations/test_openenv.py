"""OpenEnv: gemgym envs served by OpenEnv's own server (a real uvicorn on loopback) and played
with OpenEnv's own clients, and OpenEnv servers played as gemgym envs."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.extras import needs_module

needs_module("openenv.core.env_server", "openenv")
pytestmark = pytest.mark.openenv

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

import gemgym  # noqa: E402
from gemgym.errors import ConfigError, ResetNeeded  # noqa: E402
from gemgym.integrations.openenv import (  # noqa: E402
    GemgymEnvClient,
    OpenEnvEnv,
    TextAction,
    create_app,
)
from gemgym.prompting import model_view  # noqa: E402
from gemgym.testing import check_env  # noqa: E402
from helpers.net import free_port, gemgym_server, wait_for_port  # noqa: E402

GUESS = "game:GuessTheNumber-v0-easy"
GUESSES = ["\\boxed{5}", "\\boxed{7}", "\\boxed{3}", "\\boxed{9}", "\\boxed{1}"]


def _serve(env_id: str, **kwargs: Any) -> Iterator[str]:
    port = free_port()
    config = uvicorn.Config(
        create_app(env_id, **kwargs), host="127.0.0.1", port=port, log_level="critical"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port, timeout_s=30, what="the uvicorn server")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def guess_url() -> Iterator[str]:
    yield from _serve(GUESS, max_concurrent_envs=8)


def _local(env_id: str, seed: int, actions: list[str]) -> list[tuple[Any, ...]]:
    env = gemgym.make(env_id)
    obs, info = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(model_view(obs, info),)]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append((model_view(obs, info), r, term, trunc))
        if term or trunc:
            break
    env.close()
    return out


def _remote(env: OpenEnvEnv, seed: int, actions: list[str]) -> list[tuple[Any, ...]]:
    obs, _ = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(obs,)]
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        out.append((obs, r, term, trunc))
        if term or trunc:
            break
    return out


def test_a_served_env_plays_the_episode_it_plays_in_process(guess_url: str) -> None:
    env = OpenEnvEnv(guess_url)
    assert env.reset(seed=0)[1]["suffix"] == gemgym.make(GUESS).reset(seed=0)[1]["suffix"]
    for seed in (0, 3, 11):
        remote = _remote(env, seed, GUESSES)
        assert remote == _local(GUESS, seed, GUESSES)
    # the turn limit is a truncation on both sides; a format error terminates
    assert remote[-1][3] or remote[-1][2]
    env.reset(seed=1)
    _, reward, term, trunc, info = env.step("no guess here")
    assert term and not trunc and reward < 0 and info["format_error"]
    with pytest.raises(ResetNeeded):
        env.step("\\boxed{2}")
    env.close()
    env.close()


def test_sessions_are_independent(guess_url: str) -> None:
    a, b = OpenEnvEnv(guess_url), OpenEnvEnv(guess_url)
    a.reset(seed=0)
    b.reset(seed=5)
    steps_a = [a.step(g)[:4] for g in GUESSES[:2]]  # interleaved on the server
    steps_b = [b.step(g)[:4] for g in GUESSES[:2]]
    assert steps_a == _local(GUESS, 0, GUESSES[:2])[1:]
    assert steps_b == _local(GUESS, 5, GUESSES[:2])[1:]
    assert steps_a != steps_b
    a.close()
    b.close()


def test_the_remote_env_passes_the_conformance_checker(guess_url: str) -> None:
    env = OpenEnvEnv(guess_url, random_actions=GUESSES)
    check_env(env)
    # a copy mid-episode replays it in its own session and goes on from there
    env.reset(seed=2)
    env.step(GUESSES[0])
    copy = pickle.loads(pickle.dumps(env))
    assert copy.step(GUESSES[1])[:4] == env.step(GUESSES[1])[:4]
    copy.close()
    env.reset()  # unseeded: nothing to replay a copy from
    with pytest.raises(NotImplementedError, match="without a seed"):
        env.spawn(same_state=True)
    env.close()


def test_a_vector_env_of_remote_envs(guess_url: str) -> None:
    from gemgym.vector import make_vector_env

    venv = make_vector_env(env_fns=[lambda: OpenEnvEnv(guess_url)] * 3, backend="thread")
    obs, _ = venv.reset(seed=7)
    local = [_local(GUESS, 7 + i, GUESSES[:1]) for i in range(3)]
    assert list(obs) == [run[0][0] for run in local]
    obs, rewards, *_ = venv.step([GUESSES[0]] * 3)
    assert list(obs) == [run[1][0] for run in local]
    assert list(rewards) == [run[1][1] for run in local]
    venv.close()


def test_openenvs_own_clients(guess_url: str) -> None:
    with GemgymEnvClient(base_url=guess_url).sync() as client:
        first = client.reset(seed=3)
        assert first.observation.text == _local(GUESS, 3, [])[0][0]
        result = client.step(TextAction(message=GUESSES[0]))
        assert result.reward == _local(GUESS, 3, GUESSES[:1])[1][1]
        assert result.observation.info["turn"] == 1
        assert client.state().step_count == 1
    with GenericEnvClient(base_url=guess_url).sync() as generic:
        result = generic.reset(seed=3)
        assert result.observation["text"] == first.observation.text
    # plain HTTP: OpenEnv's health and schema routes
    assert httpx.get(f"{guess_url}/health").status_code == 200
    schema = httpx.get(f"{guess_url}/schema").json()
    assert "message" in str(schema["action"])


def test_unknown_ids_and_bad_arguments_are_reported() -> None:
    with pytest.raises(Exception, match="GuessTheNumber"):
        create_app("game:GuessTheNumbr-v0")
    with pytest.raises(ConfigError, match="max_concurrent_envs"):
        create_app(GUESS, max_concurrent_envs=0)
    with pytest.raises(ConfigError, match="http"):
        OpenEnvEnv("localhost:8000")


@pytest.mark.parametrize("workers", [1, 2])
def test_gemgym_serve_runs_a_server(workers: int) -> None:
    args = ("serve", "game:Wordle-v0-easy", "--workers", str(workers))
    with gemgym_server(*args, what="gemgym serve") as server:
        envs = [OpenEnvEnv(server.url) for _ in range(4)]  # sessions spread over the workers
        for seed, env in enumerate(envs):
            assert _remote(env, seed, ["\\boxed{crane}"]) == _local(
                "game:Wordle-v0-easy", seed, ["\\boxed{crane}"]
            )
        for env in envs:
            env.close()
    out, err, proc = server.out, server.err, server.proc
    assert "serving game:Wordle-v0-easy" in out
    assert "Exception" not in err  # sessions that end are not logged as server errors
    assert proc.returncode == 0  # Ctrl-C stops it cleanly
