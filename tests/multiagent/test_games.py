"""The built-in multi-agent games: rules, experts, bad moves, seeding."""

from __future__ import annotations

import random

import pytest

import gemgym
import gemgym.multiagent as ma
from gemgym.envs.multiagent.kuhn_poker import KuhnPoker
from gemgym.envs.multiagent.negotiation import Negotiation
from gemgym.envs.multiagent.tictactoe import TicTacToe
from gemgym.errors import ConfigError
from gemgym.multiagent import InvalidMove, Match
from gemgym.testing import check_env

GAME_IDS = ma.list_games("ma:*")
GARBAGE = [
    "",
    "hello",
    "\\boxed{}",
    "\\boxed{999999999999999999999}",
    "\\boxed{propose -1 2}",
    "\\boxed{" * 50,
    "ünïcödé \\boxed{✓}",
    "x" * 10_000,
    "\\boxed{accept accept}",
]


def _play_out(game_id: str, seed: int, policies: dict[str, str]) -> dict[str, float]:
    """Play one game in the AEC form with 'expert'/'random' seats; the final payoffs."""
    env = ma.make(game_id)
    env.reset(seed=seed)
    rng = random.Random(seed)
    total = dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        _, reward, term, trunc, _ = env.last()
        total[agent] += reward
        if term or trunc:
            env.step(None)
            continue
        game = env.game
        move = (
            game.expert_action(agent)
            if policies[agent] == "expert"
            else game.random_action(agent, rng)
        )
        env.step(move)
    return total


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_check_env_on_selfplay_view(game_id: str) -> None:
    check_env(game_id)
    check_env(gemgym.make(game_id, opponent="expert", learner="random"))


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_garbage_actions_become_penalties_then_forfeit(game_id: str) -> None:
    env = ma.make(game_id, max_invalid_moves=len(GARBAGE) + 2)
    env.reset(seed=1)
    agent = env.agent_selection
    assert env.acting_agents() == [agent]
    for bad in [*GARBAGE, 12, None, b"\\boxed{1}"]:
        env.step(bad)
        obs, reward, term, trunc, info = env.last()
        assert env.agent_selection == agent  # the same seat tries again
        assert "invalid" in obs.lower()
        assert "invalid_move" in info
        if term:
            break
    assert term  # the streak forfeited the game
    assert env.infos[agent]["forfeited"] == agent
    assert env.infos[agent]["returns"][agent] <= 0


def test_tictactoe_expert_never_loses() -> None:
    for seed in range(30):
        for seat in ("player_0", "player_1"):
            other = "player_1" if seat == "player_0" else "player_0"
            total = _play_out("ma:TicTacToe-v0", seed, {seat: "expert", other: "random"})
            assert total[seat] >= 0
        both = _play_out("ma:TicTacToe-v0", seed, dict.fromkeys(("player_0", "player_1"), "expert"))
        assert both == {"player_0": 0.0, "player_1": 0.0}


def test_tictactoe_rules() -> None:
    g = TicTacToe()
    g.new_game(random.Random(0))
    for agent, cell in [("player_0", 1), ("player_1", 4), ("player_0", 2), ("player_1", 5)]:
        g.play_move(agent, f"I pick \\boxed{{{cell}}}")
    with pytest.raises(InvalidMove, match="taken"):
        g.play_move("player_0", "\\boxed{4}")
    with pytest.raises(InvalidMove, match="1 to 9"):
        g.play_move("player_0", "\\boxed{10}")
    g.play_move("player_0", "\\boxed{3}")
    assert g.is_over() and g.returns() == {"player_0": 1.0, "player_1": -1.0}
    assert "You won" in g.observe("player_0")


def test_kuhn_payoffs_and_hidden_cards() -> None:
    g = KuhnPoker()
    g.new_game(random.Random(0))
    g.cards = ("K", "J")
    assert "Your card: King" in g.observe("player_0")
    assert "Your card: Jack" in g.observe("player_1") and "held" not in g.observe("player_1")
    g.play_move("player_0", "\\boxed{bet}")
    with pytest.raises(InvalidMove, match="call"):
        g.play_move("player_1", "\\boxed{check}")
    g.play_move("player_1", "\\boxed{CALL}")
    assert g.returns() == {"player_0": 2.0, "player_1": -2.0}
    assert "opponent held the Jack" in g.observe("player_0")  # cards are shown at the end


def test_kuhn_expert_is_not_exploited_by_random() -> None:
    wins = 0.0
    n = 600
    for seed in range(n):
        seat = ("player_0", "player_1")[seed % 2]
        other = "player_1" if seat == "player_0" else "player_0"
        wins += _play_out("ma:KuhnPoker-v0", seed, {seat: "expert", other: "random"})[seat]
    assert wins / n > 0.1  # the equilibrium strategy beats a random player clearly


def test_negotiation_deal_and_no_deal() -> None:
    g = Negotiation(max_turns=2)
    g.new_game(random.Random(3))
    with pytest.raises(InvalidMove, match="no proposal"):
        g.play_move("player_0", "\\boxed{accept}")
    with pytest.raises(InvalidMove, match="pool has only"):
        g.play_move("player_0", "\\boxed{propose 9 9 9}")
    keep = g.counts
    g.play_move("player_0", f"\\boxed{{propose {keep[0]} {keep[1]} {keep[2]}}}")
    g.play_move("player_1", "\\boxed{accept}")
    assert g.returns() == {"player_0": 1.0, "player_1": 0.0}
    g.new_game(random.Random(4))
    g.play_move("player_0", "\\boxed{propose 0 0 0}")
    g.play_move("player_1", "\\boxed{propose 0 0 0}")
    assert g.is_over() and g.returns() == {"player_0": 0.0, "player_1": 0.0}
    with pytest.raises(ConfigError):
        Negotiation(max_turns=1)


def test_negotiation_experts_mostly_deal() -> None:
    deals = sum(
        _play_out("ma:Negotiation-v0", s, dict.fromkeys(("player_0", "player_1"), "expert"))[
            "player_0"
        ]
        > 0
        for s in range(50)
    )
    assert deals >= 40


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_same_seed_same_game(game_id: str) -> None:
    a, b = ma.make(game_id), ma.make(game_id)
    a.reset(seed=7)
    b.reset(seed=7)
    assert a.observe("player_0") == b.observe("player_0")
    assert a.observe("player_1") == b.observe("player_1")
    c = ma.make(game_id)
    c.reset(seed=8)
    differs = c.observe("player_0") != a.observe("player_0")
    c.reset(seed=7)
    assert c.observe("player_0") == a.observe("player_0")
    assert differs or game_id == "ma:TicTacToe-v0"  # TicTacToe always starts empty


def test_match_rejects_bad_settings() -> None:
    with pytest.raises(ConfigError):
        Match(TicTacToe(), max_invalid_moves=0)
    with pytest.raises(ConfigError):
        ma.make("ma:TicTacToe-v0", game_kwargs={"size": 4})
    with pytest.raises(ConfigError, match="single-agent"):
        ma.make("game:GuessTheNumber-v0-easy")


def test_a_game_that_defines_the_old_play_hook_still_plays_and_is_told_the_new_name() -> None:
    with pytest.warns(DeprecationWarning, match="now play_move"):

        class OldTicTacToe(TicTacToe):
            def play(self, agent: str, action: str) -> None:  # the hook's old name
                TicTacToe.play_move(self, agent, action)

    match = Match(OldTicTacToe())
    match.reset(random.Random(0))
    rewards, error = match.play_move("player_0", "\\boxed{5}")
    assert error is None and rewards == {"player_0": 0.0, "player_1": 0.0}
    rewards, error = match.play_move("player_1", "\\boxed{5}")
    assert error is not None and "taken" in error and rewards["player_1"] < 0


def test_games_run_without_pettingzoo() -> None:
    """Only the spaces need gymnasium; the games, both forms and self-play work without it."""
    import subprocess
    import sys

    code = """
import sys
sys.modules["pettingzoo"] = None
sys.modules["gymnasium"] = None
import gemgym, gemgym.multiagent as ma
from gemgym.errors import DependencyNotInstalled
env = ma.make("ma:TicTacToe-v0")
env.reset(seed=0)
for agent in env.agent_iter():
    obs, r, te, tr, info = env.last()
    env.step(None if te or tr else env.expert_action(agent))
assert not env.agents
try:
    env.action_space("player_0")
except DependencyNotInstalled as e:
    assert "gemgym[multiagent]" in str(e)
else:
    raise SystemExit("spaces without gymnasium")
gemgym.make("ma:KuhnPoker-v0").reset(seed=0)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
