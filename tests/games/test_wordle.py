"""Wordle: GEM's rules and rewards, real words enforced, duplicate-letter feedback."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.wordle import WordleEnv, wordle_feedback
from gemgym.errors import ConfigError


def _env(preset: str = "hard") -> WordleEnv:
    env = gemgym.make(f"game:Wordle-v0-{preset}").unwrapped
    assert isinstance(env, WordleEnv)
    return env


@pytest.mark.parametrize(
    ("secret", "guess", "marks"),
    [
        ("CRANE", "CRANE", "GGGGG"),
        ("CRANE", "NACRE", "YYYYG"),
        # greens first: the second E of EERIE is green, so only one E is left for yellows
        ("THEME", "EERIE", "YXXXG"),
        # a letter guessed twice, present once: the first occurrence is yellow, the second grey
        ("ABBEY", "KEEPS", "XYXXX"),
        ("ROBOT", "BOOKS", "YGYXX"),
        ("SPEED", "ERASE", "YXXYY"),
        ("LLAMA", "ALLAY", "YGYYX"),
    ],
)
def test_feedback_duplicate_letters(secret: str, guess: str, marks: str) -> None:
    assert wordle_feedback(secret, guess) == marks


def test_presets() -> None:
    for preset, length, turns in (("easy", 3, 15), ("hard", 5, 25)):
        env = _env(preset)
        obs, info = env.reset(seed=0)
        assert (env.word_length, env.max_turns) == (length, turns)
        assert f"secret {length}-letter word within {turns} turns" in obs
        assert info == {"suffix": "Enter your guess."}
        assert len(env.secret_word) == length and env.secret_word.isupper()
    env = _env("random")
    seen = set()
    for s in range(60):
        env.reset(seed=s)
        assert 3 <= env.word_length <= 5 and env.max_turns == 5 * env.word_length
        seen.add(env.word_length)
    assert seen == {3, 4, 5}


def test_feedback_is_a_readable_line_and_rewards_new_greens() -> None:
    env = _env()
    env.reset(seed=1)
    secret = env.secret_word
    # a real word sharing exactly its first letter's position with the secret, if any
    from gemgym.envs.games.wordle import _secrets

    guess = next(w for w in _secrets(5) if w[0] == secret[0] and w != secret)
    obs, r, te, tr, info = env.step(f"my guess: \\boxed{{{guess.lower()}}}")
    marks = wordle_feedback(secret, guess)
    assert (
        obs == f"At turn 1, you guessed {guess}.\nFeedback:\n{' '.join(guess)}\n{' '.join(marks)}"
    )
    assert "[" not in obs and "'" not in obs
    assert r == pytest.approx(0.5 * marks.count("G") / 5)
    assert (te, tr) == (False, False) and info["suffix"] == "Enter your guess."
    # solving pays the remaining greens plus 0.5: the episode sums to 1.0
    obs, r2, te, tr, info = env.step(f"\\boxed{{{secret}}}")
    assert (te, tr) == (True, False) and info["success"] is True
    assert r + r2 == pytest.approx(1.0)
    assert "Congratulations" in obs


def test_greens_are_paid_once() -> None:
    env = _env()
    env.reset(seed=2)
    env.secret_word = "CRANE"
    assert env.step(r"\boxed{CRATE}")[1] == pytest.approx(0.5 * 4 / 5)
    assert env.step(r"\boxed{GRACE}")[1] == 0.0  # R, A, E already green
    assert env.step(r"\boxed{CRANE}")[1] == pytest.approx(0.5 / 5 + 0.5)


def test_invalid_moves_are_not_format_errors() -> None:
    env = _env()
    env.reset(seed=0)
    env.secret_word = "CRANE"
    obs, r, te, tr, info = env.step(r"\boxed{CAT}")
    assert "has 3 letters" in obs and (r, te, tr) == (0.0, False, False)
    obs, r, te, tr, info = env.step(r"\boxed{XQZVK}")
    assert "not a valid English word" in obs and (r, te, tr) == (0.0, False, False)
    assert "format_error" not in info
    env.step(r"\boxed{HOUSE}")
    obs, r, te, tr, _ = env.step(r"\boxed{house}")
    assert "already guessed" in obs and (r, te, tr) == (0.0, False, False)
    # inflected forms are real words too
    assert "Feedback" in env.step(r"\boxed{DOORS}")[0]


def test_lenient_mode_accepts_any_letters() -> None:
    env = WordleEnv(word_length=5, only_real_words=False, max_turns=5)
    env.reset(seed=0)
    assert "Feedback" in env.step(r"\boxed{XQZVK}")[0]


def test_spaced_letters_and_last_box_win() -> None:
    env = _env()
    env.reset(seed=0)
    env.secret_word = "CRANE"
    obs, *_ = env.step(r"\boxed{HOUSE} no, \boxed{c r a t e}")
    assert obs.startswith("At turn 1, you guessed CRATE.")


def test_format_error_terminates() -> None:
    env = _env()
    env.reset(seed=0)
    obs, r, te, tr, info = env.step("CRANE")
    assert (r, te, tr) == (-0.1, True, False) and info["format_error"] is True
    env.reset(seed=0)
    assert env.step(r"\boxed{CRANE1}")[1:4] == (-0.1, True, False)


def test_turn_limit_truncates_only() -> None:
    env = WordleEnv(word_length=3, max_turns=2)
    env.reset(seed=0)
    env.secret_word = "CAT"
    assert env.step(r"\boxed{DOG}")[2:4] == (False, False)
    obs, r, te, tr, info = env.step(r"\boxed{PIG}")
    assert (te, tr) == (False, True) and info["success"] is False
    assert "maximum number of turns" in obs
    env.reset(seed=0)
    env.step(r"\boxed{DOG}")
    assert env.step("nothing")[2:4] == (True, False)  # a format error is not also truncated


def test_determinism_and_independence() -> None:
    a, b = _env(), _env()
    secrets = set()
    for s in range(40):
        assert a.reset(seed=s) == b.reset(seed=s)
        assert a.secret_word == b.secret_word
        secrets.add(a.secret_word)
    assert len(secrets) > 25


def test_random_action_parses_and_is_a_real_word() -> None:
    env = _env("random")
    for s in range(30):
        env.reset(seed=s)
        obs, _, _, _, info = env.step(env.sample_random_action())
        assert "format_error" not in info
        assert "not a valid" not in obs and "letters but" not in obs


def test_expert_solves_every_preset_and_random_is_weak() -> None:
    for preset in ("easy", "hard", "random"):
        eps = list(gemgym.rollout(f"game:Wordle-v0-{preset}", OracleAgent(), episodes=60, seed=0))
        assert all(e.success for e in eps)
    rand = list(gemgym.rollout("game:Wordle-v0-hard", RandomAgent(), episodes=60, seed=0))
    assert sum(e.success for e in rand) < 20


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="word_length"):
        WordleEnv(word_length=2)
    with pytest.raises(ConfigError, match="max_turns"):
        WordleEnv(max_turns=0)
