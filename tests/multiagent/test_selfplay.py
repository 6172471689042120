"""SelfPlayEnv (a seat as a single-agent env) and SeatVectorEnv (every seat of many games)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import gemgym
from gemgym.agents import BaseAgent, OracleAgent, RandomAgent
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.experience import rollout
from gemgym.multiagent import SeatVectorEnv, SelfPlayEnv, agent_policy


def test_opponent_policies_and_seats() -> None:
    seen: list[str] = []

    def fixed(obs: str) -> str:  # a fixed rule that also records what the opponent saw
        seen.append(obs)
        return "\\boxed{1}" if "1 |" in obs else "\\boxed{9}"

    env = gemgym.make("ma:TicTacToe-v0", learner="player_1", opponent=fixed)
    obs, info = env.reset(seed=0)
    assert info["learner"] == "player_1" and "as O" in obs
    assert "X took cell 1" in obs and seen and "as X" in seen[0]
    obs = env.step("\\boxed{5}")[0]
    assert "X took cell 9" in obs and len(seen) == 2 and "O took cell 5" in seen[1]


def test_learner_seat_drawn_per_episode_from_the_seed() -> None:
    env = gemgym.make("ma:KuhnPoker-v0", learner="random")
    seats = {env.reset(seed=s)[1]["learner"] for s in range(20)}
    assert seats == {"player_0", "player_1"}
    assert env.reset(seed=3)[1]["learner"] == env.reset(seed=3)[1]["learner"]


def test_rewards_are_the_learners_payoff() -> None:
    env = gemgym.make("ma:TicTacToe-v0", opponent="expert")
    env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        _, r, done, trunc, info = env.step(env.expert_action())
        total += r
        assert not trunc
    assert total == 0.0 and info["returns"] == {"player_0": 0.0, "player_1": 0.0}
    with pytest.raises(ResetNeeded):
        env.step("\\boxed{1}")


def test_opponent_forfeit_pays_the_learner() -> None:
    env = gemgym.make("ma:TicTacToe-v0", opponent=lambda obs: "no idea", max_invalid_moves=2)
    env.reset(seed=0)
    _, r, done, _, info = env.step("\\boxed{5}")
    assert done and r == 1.0 and info["forfeited"] == "player_1"


def test_llm_agent_as_opponent() -> None:
    class EchoLLM(BaseAgent):  # stands in for OpenAIAgent: act() on a batch of observations
        def act(self, observations: Sequence[Any], *, slots: Sequence[int], venv: Any) -> list[Any]:
            return [
                "\\boxed{check}" if "check or bet" in o else "\\boxed{call}" for o in observations
            ]

    env = gemgym.make("ma:KuhnPoker-v0", learner="player_1", opponent=agent_policy(EchoLLM()))
    obs, _ = env.reset(seed=1)
    assert "player_0 checked" in obs


def test_bad_configuration_is_an_error() -> None:
    with pytest.raises(ConfigError):
        gemgym.make("ma:TicTacToe-v0", learner="player_7")
    with pytest.raises(ConfigError):
        gemgym.make("ma:TicTacToe-v0", opponent="genius")
    with pytest.raises(ConfigError):
        gemgym.make("ma:TicTacToe-v0", opponent={"player_9": "random"})
    with pytest.raises(TypeError):
        gemgym.make("ma:TicTacToe-v0", colour="red")


def test_picklable_mid_game_and_vector_backends() -> None:
    env = SelfPlayEnv("ma:Negotiation-v0", opponent="expert")
    env.reset(seed=2)
    env.step(env.sample_random_action())
    clone = pickle.loads(pickle.dumps(env))
    a = env.expert_action()
    assert env.step(a)[:4] == clone.step(a)[:4]
    venv = gemgym.make_vec("ma:KuhnPoker-v0", 4, backend="process", opponent="expert")
    try:
        obs, _ = venv.reset(seed=0)
        assert len(obs) == 4 and all("Kuhn poker" in o for o in obs)
    finally:
        venv.close()


def test_rollout_with_oracle_against_random() -> None:
    episodes = list(
        rollout(
            "ma:TicTacToe-v0", OracleAgent(), episodes=20, seed=0, batch_size=4, learner="random"
        )
    )
    returns = [sum(t.reward for t in ep.transitions) for ep in episodes]
    assert len(returns) == 20 and min(returns) >= 0 and sum(returns) >= 10


def test_seat_vector_env_steps_all_seats() -> None:
    venv = SeatVectorEnv("ma:TicTacToe-v0", num_games=3)
    obs, infos = venv.reset(seed=0)
    assert len(obs) == len(venv) == 6
    assert venv.acting_slots() == [0, 2, 4]  # X of each game
    assert [i["to_act"] for i in infos] == [True, False] * 3
    finished = 0
    for _ in range(40):
        acting = venv.acting_slots()
        moves = dict(zip(acting, venv.call("expert_action", indices=acting), strict=True))
        obs, rew, term, trunc, infos = venv.step(moves)
        assert rew.shape == term.shape == trunc.shape == (6,)
        for g in range(3):
            if term[2 * g]:
                finished += 1
                assert term[2 * g + 1] and "final_obs" in infos[2 * g]
                assert rew[2 * g] == rew[2 * g + 1] == 0.0  # experts draw
    assert finished >= 6
    other = SeatVectorEnv("ma:TicTacToe-v0", num_games=3)
    assert other.reset(seed=0) == venv.reset(seed=0)


def test_seat_vector_env_with_agents_and_bad_moves() -> None:
    venv = SeatVectorEnv("ma:KuhnPoker-v0", num_games=2)
    venv.reset(seed=5)
    acting = venv.acting_slots()
    actions: list[Any] = [None] * len(venv)
    for s, a in zip(acting, RandomAgent().act([], slots=acting, venv=venv), strict=True):  # type: ignore[arg-type]
        actions[s] = a
    actions[acting[0]] = "gibberish"
    _, rew, _, _, infos = venv.step(actions)
    assert rew[acting[0]] == pytest.approx(-0.1) and "invalid_move" in infos[acting[0]]
    assert "invalid_move" not in infos[acting[1]]
    assert not np.isclose(rew[acting[1]], -0.1)
    with pytest.raises(ConfigError):
        venv.step(["x"])


def test_game_ended_before_the_learners_first_move() -> None:
    env = gemgym.make(
        "ma:TicTacToe-v0", learner="player_1", opponent=lambda obs: "?", max_invalid_moves=1
    )
    obs, info = env.reset(seed=0)
    assert info["forfeited"] == "player_0" and "forfeited" in obs
    _, reward, terminated, _, _ = env.step("\\boxed{5}")  # ignored: the game is over
    assert terminated and reward == 1.0
    with pytest.raises(ResetNeeded):
        env.step("\\boxed{5}")
