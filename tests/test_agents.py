"""Agents: random, oracle, function and OpenAI-compatible (against a real loopback server)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

import gemgym
from gemgym.agents import FunctionAgent, OpenAIAgent, OracleAgent, RandomAgent, make_agent
from gemgym.errors import AgentError, ConfigError
from gemgym.experience import summarize
from helpers.extras import skip_without


class _ChatServer(BaseHTTPRequestHandler):
    """A stand-in LLM server speaking the OpenAI chat-completions protocol.

    It guesses the number of user messages it was sent, so a correct conversation history
    makes it guess 1, 2, 3, ... in successive turns.
    """

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        n_user = sum(m["role"] == "user" for m in body["messages"])
        reply = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"I guess \\boxed{{{n_user}}}"},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def llm_server() -> Iterator[str]:
    _ChatServer.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_one_random_and_oracle_pair_for_every_front_end() -> None:
    """``gemgym.evaluation`` exports ``gemgym.agents``' classes; as the engine's batch policies
    (how rollout, ``gemgym run`` and ``gemgym eval`` play them) they count no model request,
    and as agents over a vector env they play the same moves."""
    import gemgym.evaluation as evaluation
    import gemgym.evaluation.agents as eval_agents
    from gemgym.vector import make_vec

    assert evaluation.RandomAgent is RandomAgent and evaluation.OracleAgent is OracleAgent
    assert not hasattr(eval_agents, "RandomAgent") and not hasattr(eval_agents, "OracleAgent")
    (ep,) = gemgym.rollout("game:GuessTheNumber-v0-hard", OracleAgent(), episodes=1, seed=3)
    assert ep.success and ep.usage.get("requests", 0) == 0
    venv = make_vec("game:GuessTheNumber-v0-hard", num_envs=1, autoreset_mode="disabled")
    try:
        obs, _ = venv.reset(seed=3)
        moves = []
        done = False
        while not done:
            (action,) = OracleAgent().act(list(obs), slots=[0], venv=venv)
            moves.append(action)
            obs, _, term, trunc, _ = venv.step([action])
            done = bool(term[0] or trunc[0])
    finally:
        venv.close()
    assert moves == [t.action for t in ep.turns]


def test_random_and_oracle_agents() -> None:
    oracle = summarize(
        list(gemgym.rollout("game:GuessTheNumber-v0-hard", OracleAgent(), episodes=100, seed=0))
    )
    rand = summarize(
        list(gemgym.rollout("game:GuessTheNumber-v0-hard", RandomAgent(), episodes=300, seed=0))
    )
    assert oracle["success_rate"] == 1.0
    assert oracle["mean_turns"] <= 6
    assert 0.05 < rand["success_rate"] < 0.3


def test_function_agent_checks_batch_size() -> None:
    agent = FunctionAgent(lambda obs: [r"\boxed{1}"] * len(obs))
    eps = list(gemgym.rollout("game:GuessTheNumber-v0-easy", agent, episodes=3, seed=0))
    assert all(e.transitions[0].action == r"\boxed{1}" for e in eps)
    bad = FunctionAgent(lambda obs: [])
    with pytest.raises(ConfigError, match="0 actions for 1"):
        list(gemgym.rollout("game:GuessTheNumber-v0-easy", bad, episodes=1))


def test_make_agent_rejects_unknown() -> None:
    with pytest.raises(ConfigError, match="random, oracle or openai"):
        make_agent("smart")


@skip_without("openai")
def test_openai_agent_keeps_the_conversation(llm_server: str) -> None:
    agent = OpenAIAgent(model="test-model", base_url=llm_server, system_prompt="You play games.")
    eps = list(
        gemgym.rollout("game:GuessTheNumber-v0-easy", agent, episodes=4, seed=0, batch_size=2)
    )
    agent.close()
    assert len(eps) == 4
    for ep in eps:
        guesses = [t.action for t in ep.transitions]
        assert guesses[0] == r"I guess \boxed{1}"
        assert guesses == [f"I guess \\boxed{{{i + 1}}}" for i in range(len(guesses))]
    first = _ChatServer.requests[0]
    assert first["model"] == "test-model"
    assert first["messages"][0] == {"role": "system", "content": "You play games."}
    longest = max(len(r["messages"]) for r in _ChatServer.requests)
    assert longest >= 4  # system, user, assistant, user, ...


@skip_without("openai")
def test_openai_agent_unreachable_server_is_a_clear_error() -> None:
    agent = OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1", timeout=2, max_retries=0)
    with pytest.raises(AgentError, match="cannot reach the LLM server"):
        list(gemgym.rollout("game:GuessTheNumber-v0-easy", agent, episodes=1))
    agent.close()


def test_openai_agent_needs_a_model() -> None:
    with pytest.raises(ConfigError, match="model"):
        OpenAIAgent(model="")
