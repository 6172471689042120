"""Hangman: letters, whole-word guesses, rewards, presets and the letter-frequency expert."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.hangman import HangmanEnv
from gemgym.errors import ConfigError


def _env(preset: str = "hard") -> HangmanEnv:
    env = gemgym.make(f"game:Hangman-v0-{preset}").unwrapped
    assert isinstance(env, HangmanEnv)
    return env


def _with_secret(secret: str, max_turns: int = 20) -> HangmanEnv:
    env = HangmanEnv(word_length=len(secret), max_turns=max_turns)
    env.reset(seed=0)
    env.secret_word = secret
    return env


def test_presets() -> None:
    for preset, length, turns in (("easy", 3, 10), ("hard", 7, 20)):
        env = _env(preset)
        obs, info = env.reset(seed=0)
        assert (env.word_length, env.max_turns) == (length, turns)
        assert f"guess the {length}-letter word" in obs and f"within {turns} turns" in obs
        assert "\\boxed{E}" in obs  # the letter example is a letter (GEM swapped them)
        assert info["suffix"] == (
            "Here is the current state of the Hangman grid:\n"
            + " ".join(f"C{i:02}" for i in range(length))
            + "\n"
            + "  _ " * length
            + "\n\nEnter your guess."
        )
    env = _env("random")
    lengths = set()
    for s in range(40):
        env.reset(seed=s)
        lengths.add(env.word_length)
        assert env.max_turns == int(10 + 2.5 * (env.word_length - 3) + 0.5)
    assert lengths == {3, 4, 5, 6}


def test_letters_reveal_and_pay_half_by_share() -> None:
    env = _with_secret("BALLOON")
    obs, r, te, tr, info = env.step(r"\boxed{l}")
    assert r == pytest.approx(0.5 * 2 / 7) and (te, tr) == (False, False)
    assert "  _   _   L   L   _   _   _ " in info["suffix"]
    assert "is in the secret word" in obs
    obs, r, *_ = env.step(r"\boxed{Z}")
    assert r == 0.0 and "not in the secret word" in obs
    obs, r, *_ = env.step(r"\boxed{L}")
    assert r == 0.0 and "already guessed" in obs


def test_revealing_every_letter_wins() -> None:
    env = _with_secret("BALLOON")
    total = 0.0
    for letter in "BALO":
        _, r, te, tr, info = env.step(f"\\boxed{{{letter}}}")
        total += r
        assert not tr
    _, r, te, tr, info = env.step(r"\boxed{N}")
    total += r
    assert (te, tr) == (True, False) and info["success"] is True
    assert total == pytest.approx(1.0)


def test_word_guess() -> None:
    env = _with_secret("BALLOON")
    env.step(r"\boxed{O}")
    obs, r, te, tr, info = env.step(r"\boxed{BALL}")
    assert "length 4" in obs and (r, te) == (0.0, False)
    obs, r, te, tr, info = env.step(r"\boxed{BASSOON}")
    assert "incorrect" in obs and (r, te) == (0.0, False)
    obs, r, te, tr, info = env.step(r"it is \boxed{balloon}")
    assert (te, tr) == (True, False) and info["success"] is True
    assert r == pytest.approx(0.5 * 5 / 7 + 0.5)
    assert "Congratulations" in obs


def test_format_errors_and_turn_limit() -> None:
    env = _env()
    for bad in ("E", r"\boxed{3}", r"\boxed{E!}", r"\boxed{}"):
        env.reset(seed=0)
        assert env.step(bad)[1:4] == (-0.1, True, False)
    env = _with_secret("CAT", max_turns=2)
    env.step(r"\boxed{Z}")
    obs, r, te, tr, info = env.step(r"\boxed{Q}")
    assert (te, tr) == (False, True) and info["success"] is False


def test_determinism() -> None:
    a, b = _env(), _env()
    words = set()
    for s in range(30):
        assert a.reset(seed=s) == b.reset(seed=s)
        assert a.secret_word == b.secret_word
        words.add(a.secret_word)
    assert len(words) > 20


def test_hardcore_uses_the_rare_list() -> None:
    env = HangmanEnv(word_length=None, hardcore=True, max_turns=None)
    common = HangmanEnv(word_length=7)
    for s in range(20):
        env.reset(seed=s)
        assert 5 <= env.word_length <= 8
        assert env.secret_word not in common._words()


def test_random_action_is_well_formed() -> None:
    env = _env("random")
    for s in range(30):
        env.reset(seed=s)
        assert "format_error" not in env.step(env.sample_random_action())[4]


def test_expert_uses_only_the_grid_and_solves_every_preset() -> None:
    env = _env()
    env.reset(seed=5)
    secret = env.secret_word
    miss = next(ch for ch in "QZXJKVWYFBPGMUDCLHRSNIOATE" if ch not in secret)
    env.step(f"\\boxed{{{secret[0]}}}")
    env.step(f"\\boxed{{{miss}}}")
    cands = env.candidates()
    assert secret in cands
    for w in cands:
        assert miss not in w
        assert [i for i, ch in enumerate(w) if ch == secret[0]] == [
            i for i, ch in enumerate(secret) if ch == secret[0]
        ]
    for preset in ("easy", "hard", "random"):
        eps = list(gemgym.rollout(f"game:Hangman-v0-{preset}", OracleAgent(), episodes=60, seed=0))
        assert all(e.success for e in eps), preset
    rand = list(gemgym.rollout("game:Hangman-v0-hard", RandomAgent(), episodes=60, seed=0))
    assert sum(e.success for e in rand) < 15


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="word_length"):
        HangmanEnv(word_length=2)
    with pytest.raises(ConfigError, match="max_turns"):
        HangmanEnv(max_turns=0)
