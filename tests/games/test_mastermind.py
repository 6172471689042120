"""Mastermind: black/white pegs, milestone rewards, presets and the consistent-guess expert."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.mastermind import MastermindEnv, score_guess
from gemgym.errors import ConfigError


def _env(preset: str = "hard") -> MastermindEnv:
    env = gemgym.make(f"game:Mastermind-v0-{preset}").unwrapped
    assert isinstance(env, MastermindEnv)
    return env


@pytest.mark.parametrize(
    ("code", "guess", "pegs"),
    [
        ((1, 2, 3, 4), (1, 2, 3, 4), (4, 0)),
        ((1, 2, 3, 4), (4, 3, 2, 1), (0, 4)),
        ((1, 2, 3, 4), (1, 3, 5, 6), (1, 1)),
        ((1, 2, 3, 4), (5, 6, 7, 8), (0, 0)),
        # each code digit matches at most once
        ((1, 1, 2, 2), (1, 2, 1, 1), (1, 2)),
        ((1, 2, 3, 4), (2, 2, 2, 2), (1, 0)),
        ((5, 5, 5, 1), (1, 5, 1, 1), (2, 0)),
    ],
)
def test_pegs(code: tuple[int, ...], guess: tuple[int, ...], pegs: tuple[int, int]) -> None:
    assert score_guess(code, guess) == pegs


def test_presets() -> None:
    for preset, length, numbers, turns in (("easy", 2, 6, 10), ("hard", 4, 8, 30)):
        env = _env(preset)
        obs, info = env.reset(seed=0)
        assert (env.code_length, env.num_numbers, env.max_turns) == (length, numbers, turns)
        assert f"secret {length} digit code within {turns} turns" in obs
        assert f"digits from 1 to {numbers}" in obs and "not allowed" in obs
        assert info == {"suffix": "Enter your guess."}
        assert len(set(env.game_code)) == length
        assert all(1 <= d <= numbers for d in env.game_code)
    env = _env("random")
    for s in range(50):
        env.reset(seed=s)
        assert 2 <= env.code_length <= 6 and env.code_length <= env.num_numbers <= 12
        assert env.max_turns == 10 * (env.code_length - 1)


def test_milestone_rewards_sum_to_one() -> None:
    env = _env()
    env.reset(seed=0)
    env.game_code = (1, 2, 3, 4)
    obs, r, te, tr, info = env.step(r"\boxed{1 2 5 6}")
    assert obs == (
        "At turn 1, you guessed 1 2 5 6. This guess receives 2 black peg(s) and 0 white peg(s)."
    )
    assert r == pytest.approx(0.5) and (te, tr) == (False, False)
    assert env.step(r"\boxed{1 5 6 7}")[1] == 0.0  # fewer blacks than the best: nothing
    assert env.step(r"\boxed{1, 2, 3, 5}")[1] == pytest.approx(0.25)  # commas are accepted
    obs, r, te, tr, info = env.step(r"I am sure: \boxed{1 2 3 4}")
    assert r == pytest.approx(0.25) and (te, tr) == (True, False) and info["success"] is True
    assert "Congratulations" in obs and "1 2 3 4" in obs


def test_invalid_guesses() -> None:
    env = _env()
    env.reset(seed=0)
    env.game_code = (1, 2, 3, 4)
    obs, r, te, tr, info = env.step(r"\boxed{1 2 3}")
    assert "code has length 4" in obs and (r, te, tr) == (0.0, False, False)
    obs, *_ = env.step(r"\boxed{1 2 3 9}")
    assert "outside the range 1 to 8" in obs
    obs, *_ = env.step(r"\boxed{0 2 3 4}")
    assert "outside the range" in obs
    obs, *_ = env.step(r"\boxed{1 2 3 99999999999999999999}")
    assert "outside the range" in obs
    env.step(r"\boxed{5 6 7 8}")
    obs, r, *_ = env.step(r"\boxed{5 6 7 8}")
    assert "already guessed" in obs and r == 0.0


def test_format_errors() -> None:
    env = _env()
    for bad in ("1 2 3 4", r"\boxed{1 2 three 4}", r"\boxed{}", r"\boxed{-1 2 3 4}"):
        env.reset(seed=0)
        obs, r, te, tr, info = env.step(bad)
        assert (r, te, tr) == (-0.1, True, False) and info["format_error"] is True


def test_turn_limit_truncates_only() -> None:
    env = MastermindEnv(code_length=2, num_numbers=6, max_turns=2)
    env.reset(seed=0)
    env.game_code = (1, 2)
    env.step(r"\boxed{3 4}")
    obs, r, te, tr, info = env.step(r"\boxed{5 6}")
    assert (te, tr) == (False, True) and info["success"] is False


def test_determinism() -> None:
    a, b = _env(), _env()
    codes = set()
    for s in range(30):
        assert a.reset(seed=s) == b.reset(seed=s)
        assert a.game_code == b.game_code
        codes.add(a.game_code)
    assert len(codes) > 20


def test_random_action_is_well_formed() -> None:
    env = _env("random")
    for s in range(20):
        env.reset(seed=s)
        obs, r, te, tr, info = env.step(env.sample_random_action())
        assert "format_error" not in info
        assert "receives" in obs or info.get("success")


def test_duplicates_allowed() -> None:
    env = MastermindEnv(code_length=3, num_numbers=2, duplicate_numbers=True, max_turns=10)
    env.reset(seed=0)
    assert all(d in (1, 2) for d in env.game_code)
    eps = list(gemgym.rollout(env, OracleAgent(), episodes=10, seed=0))
    assert all(e.success for e in eps)


def test_expert_solves_every_preset() -> None:
    for preset, max_mean in (("easy", 5), ("hard", 7), ("random", 8)):
        eps = list(
            gemgym.rollout(f"game:Mastermind-v0-{preset}", OracleAgent(), episodes=40, seed=0)
        )
        assert all(e.success for e in eps)
        assert sum(e.length for e in eps) / len(eps) <= max_mean
    rand = list(gemgym.rollout("game:Mastermind-v0-hard", RandomAgent(), episodes=40, seed=0))
    assert sum(e.success for e in rand) < 10


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="num_numbers"):
        MastermindEnv(code_length=5, num_numbers=4)
    with pytest.raises(ConfigError, match="code_length"):
        MastermindEnv(code_length=0)
