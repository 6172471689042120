"""An LLM opponent (``agent_policy(OpenAIAgent(...))``) rolls out in every vector backend: the
policy pickles as a spec and each worker builds its own client."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import gemgym
from gemgym.agents import BaseAgent, OpenAIAgent
from gemgym.errors import ConfigError
from gemgym.multiagent import agent_policy
from helpers.extras import needs_module
from helpers.scripted_server import ScriptedChatServer

needs_module("aiohttp", "openai")  # OpenAIAgent's HTTP client (gemgym[openai])


def _kuhn_reply(body: dict[str, Any]) -> str:
    last = body["messages"][-1]["content"]
    return "\\boxed{check}" if "check or bet" in last else "\\boxed{call}"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer(reply=_kuhn_reply) as s:
        yield s


def _play(venv: Any) -> list[str]:
    obs, _ = venv.reset(seed=0)
    seen = list(obs)
    for _ in range(3):  # a hand of Kuhn poker: the learner (player_1) checks or calls
        obs, *_ = venv.step(["\\boxed{check}"] * len(obs))
        seen.extend(obs)
    return seen


@pytest.mark.parametrize(
    "backend", ["sync", "thread", "process", pytest.param("ray", marks=pytest.mark.slow)]
)
def test_an_openai_opponent_rolls_out_in_every_backend(
    server: ScriptedChatServer, backend: str
) -> None:
    if backend == "ray":
        needs_module("ray", "ray")
    before = len(server.requests)
    opponent = agent_policy(OpenAIAgent(model="m", base_url=server.url, max_retries=0))
    venv = gemgym.make_vec(
        "ma:KuhnPoker-v0", 2, backend=backend, learner="player_1", opponent=opponent
    )
    try:
        seen = _play(venv)
    finally:
        venv.close()
        if backend == "ray":  # the backend started Ray in this process: leave none behind
            import ray

            ray.shutdown()
    assert any("player_0 checked" in o for o in seen)  # the LLM played the first seat
    assert len(server.requests) > before


def test_a_factory_spec_builds_the_agent_where_it_plays(server: ScriptedChatServer) -> None:
    opponent = agent_policy(OpenAIAgent, model="m", base_url=server.url, max_retries=0)
    venv = gemgym.make_vec(
        "ma:KuhnPoker-v0", 2, backend="process", learner="player_1", opponent=opponent
    )
    try:
        assert any("player_0 checked" in o for o in _play(venv))
    finally:
        venv.close()


def test_the_policy_pickles_as_a_spec_not_a_client(server: ScriptedChatServer) -> None:
    agent = OpenAIAgent(model="m", base_url=server.url, temperature=0.2, keep_history=False)
    policy = agent_policy(agent)
    copy = pickle.loads(pickle.dumps(policy))
    rebuilt = copy.agent
    assert isinstance(rebuilt, OpenAIAgent) and rebuilt is not agent
    assert (rebuilt.model, rebuilt.base_url, rebuilt.temperature, rebuilt.keep_history) == (
        "m",
        server.url,
        0.2,
        False,
    )
    assert copy("Your move: check or bet.") == "\\boxed{check}"


def test_each_env_has_its_own_conversation_and_each_episode_a_new_one(
    server: ScriptedChatServer,
) -> None:
    opponent = agent_policy(OpenAIAgent(model="m", base_url=server.url, max_retries=0))
    envs = [gemgym.make("ma:KuhnPoker-v0", learner="player_1", opponent=opponent) for _ in "ab"]
    start = len(server.requests)
    for episode in range(3):
        for env in envs:
            env.reset(seed=episode)
    bodies = server.requests[start:]
    assert len(bodies) == 6
    # one user message per request: neither another env's turns nor an old episode's
    assert all(sum(m["role"] == "user" for m in b["messages"]) == 1 for b in bodies)


class Locked(BaseAgent):  # holds a lock, as an HTTP client does
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def act(self, observations: Any, *, slots: Any, venv: Any) -> list[Any]:
        return ["\\boxed{check}" for _ in observations]


def test_an_agent_that_cannot_be_sent_says_how_to_fix_it() -> None:
    policy = agent_policy(Locked())
    assert policy("check or bet") == "\\boxed{check}"  # in this process it just plays
    with pytest.raises(ConfigError, match=r"agent_policy\(Locked, \.\.\."):
        pickle.dumps(policy)
    assert pickle.loads(pickle.dumps(agent_policy(Locked)))("x") == "\\boxed{check}"


def test_a_none_reply_is_an_invalid_move_not_the_text_none() -> None:
    class Silent(BaseAgent):  # a reasoning-only reply: content null
        def act(self, observations: Any, *, slots: Any, venv: Any) -> list[Any]:
            return [None for _ in observations]

    env = gemgym.make("ma:KuhnPoker-v0", learner="player_1", opponent=agent_policy(Silent()))
    obs, info = env.reset(seed=0)
    assert info["forfeited"] == "player_0"  # three invalid moves in a row
