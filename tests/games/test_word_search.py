"""WordSearch: layout, found words, rewards, presets and the answer-reading expert."""

from __future__ import annotations

import random

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.word_search import WordSearchEnv, lay_out_words
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> WordSearchEnv:
    env = gemgym.make(f"game:WordSearch-v0-{preset}").unwrapped
    assert isinstance(env, WordSearchEnv)
    return env


def _span(word: str, placement: tuple[int, int, str]) -> tuple[int, int, int, int]:
    r, c, d = placement
    return (r, c, r, c + len(word) - 1) if d == "across" else (r, c, r + len(word) - 1, c)


@pytest.mark.parametrize("seed", range(20))
def test_words_are_in_the_grid_where_placed(seed: int) -> None:
    env = _env("random")
    env.reset(seed=seed)
    grid = env.game_board
    size = len(grid)
    longest = max(len(w) for w in env.placed_words)
    assert size == round(longest * 1.5) and all(len(row) == size for row in grid)
    assert all(ch.isalpha() and ch.isupper() for row in grid for ch in row)
    assert len(env.placed_words) == 5
    for word, (r, c, d) in env.placed_words.items():
        letters = [grid[r][c + i] if d == "across" else grid[r + i][c] for i in range(len(word))]
        assert "".join(letters) == word


def test_layout_crosses_words() -> None:
    crossed = 0
    for seed in range(20):
        grid, placed = lay_out_words(["HOUSE", "SEA", "HORSE"], random.Random(seed))
        assert set(placed) == {"HOUSE", "SEA", "HORSE"}
        assert all(d in ("across", "down") for _, _, d in placed.values())
        crossed += sum(ch != "." for row in grid for ch in row) < 5 + 3 + 5
    assert crossed >= 10  # words share letters whenever their directions allow it


def test_presets() -> None:
    env = _env("easy")
    obs, info = env.reset(seed=0)
    assert "(Basic)" in obs and "maximum of 20 turns" in obs
    assert info["suffix"].startswith("Current Board:\n   C00")
    assert "Words Found: 0/5\nEnter your guess." in info["suffix"]
    hard = _env("hard")
    hard.reset(seed=0)
    assert hard.hardcore and all(len(w) >= 5 for w in hard.placed_words)
    modes = set()
    env = _env("random")
    for s in range(20):
        env.reset(seed=s)
        modes.add(env.hardcore)
        assert (env.num_words, env.max_turns) == (5, 20)
    assert modes == {True, False}


def test_finding_words_in_either_direction() -> None:
    env = _env()
    env.reset(seed=1)
    words = list(env.placed_words.items())
    total = 0.0
    for k, (word, placement) in enumerate(words):
        r1, c1, r2, c2 = _span(word, placement)
        if k % 2:  # from the end back to the start
            r1, c1, r2, c2 = r2, c2, r1, c1
        obs, r, te, tr, info = env.step(f"found it: \\boxed{{{r1} {c1} {r2} {c2}}}")
        total += r
        assert r == pytest.approx(1 / 5)
        if k < 4:
            assert f"You found the word '{word}'" in obs and not te
            assert f"Words Found: {k + 1}/5" in info["suffix"]
            assert f"[{word[0]}]" in info["suffix"]
    assert (te, tr) == (True, False) and info["success"] is True
    assert total == pytest.approx(1.0)


def test_invalid_and_wrong_attempts() -> None:
    env = _env()
    env.reset(seed=2)
    word, placement = next(iter(env.placed_words.items()))
    r1, c1, r2, c2 = _span(word, placement)
    size = len(env.game_board)
    obs, r, te, tr, _ = env.step(f"\\boxed{{0 0 0 {size}}}")
    assert "out of bounds" in obs and (r, te, tr) == (0.0, False, False)
    obs, r, *_ = env.step(r"\boxed{0 0 2 2}")
    assert "either across" in obs and r == 0.0
    env.step(f"\\boxed{{{r1} {c1} {r2} {c2}}}")
    obs, r, *_ = env.step(f"\\boxed{{{r1} {c1} {r2} {c2}}}")
    assert "already tried" in obs and r == 0.0
    obs, r, *_ = env.step(f"\\boxed{{{r2} {c2} {r1} {c1}}}")
    assert "already found" in obs and r == 0.0  # GEM paid a reversed re-find again
    taken = {_span(w, p) for w, p in env.placed_words.items()}
    wrong = next(
        (0, a, 0, b)
        for a in range(size)
        for b in range(a + 1, size)
        if (0, a, 0, b) not in taken and (0, b, 0, a) not in taken
    )
    obs, r, *_ = env.step("\\boxed{" + " ".join(map(str, wrong)) + "}")
    assert "No word found" in obs and r == 0.0


def test_format_errors_and_turn_limit() -> None:
    env = _env()
    for bad in ("0 0 0 3", r"\boxed{0 0 3}", r"\boxed{[0 0 0 3]}", r"\boxed{a b c d}"):
        env.reset(seed=0)
        assert env.step(bad)[1:4] == (-0.1, True, False)
    env = WordSearchEnv(max_turns=2)
    env.reset(seed=0)
    env.step(r"\boxed{0 0 0 1}")
    obs, r, te, tr, info = env.step(r"\boxed{1 0 1 1}")
    assert (te, tr) == (False, True) and info["success"] is False


def test_determinism_and_random_action() -> None:
    a, b = _env(), _env()
    for s in range(10):
        assert a.reset(seed=s) == b.reset(seed=s)
        assert a.game_board == b.game_board and a.placed_words == b.placed_words
        assert "format_error" not in a.step(a.sample_random_action())[4]


def test_expert_solves_every_preset() -> None:
    for preset in ("easy", "hard", "random"):
        eps = list(
            gemgym.rollout(f"game:WordSearch-v0-{preset}", OracleAgent(), episodes=30, seed=0)
        )
        assert all(e.success and e.length == 5 for e in eps), preset
    rand = list(gemgym.rollout("game:WordSearch-v0-easy", RandomAgent(), episodes=30, seed=0))
    assert not any(e.success for e in rand)


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="num_words"):
        WordSearchEnv(num_words=0)
    with pytest.raises(ConfigError, match="max_turns"):
        WordSearchEnv(max_turns=0)
