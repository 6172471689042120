"""Crosswords: clues, letters, rewards, presets and the answer-reading expert."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.crosswords import CrosswordsEnv, clue_data
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> CrosswordsEnv:
    env = gemgym.make(f"game:Crosswords-v0-{preset}").unwrapped
    assert isinstance(env, CrosswordsEnv)
    return env


def test_clue_data_ships_with_the_package() -> None:
    easy, hard = clue_data(False), clue_data(True)
    assert len(easy) > 500 and len(hard) > 500
    assert not {w for w, _ in easy} & {w for w, _ in hard}
    for word, clue in easy + hard:
        assert word.isalpha() and word.isupper() and 3 <= len(word) <= 9
        assert clue and word.lower()[:4] not in clue.lower()


@pytest.mark.parametrize("preset", ["easy", "hard", "random"])
def test_board_clues_and_solution_agree(preset: str) -> None:
    env = _env(preset)
    for s in range(10):
        obs, info = env.reset(seed=s)
        assert f"maximum of {env.max_turns} turns" in obs
        suffix = info["suffix"]
        assert suffix.startswith("Current Board:\n   C00")
        assert "Here are the clues for the words you need to find:\n1. " in suffix
        assert suffix.endswith("Enter your guess.")
        for i, (word, (r, c, d)) in enumerate(env.placed_words.items(), start=1):
            assert f"{i}. {env.clues[word]} ({d}): {len(word)} letters" in suffix
            for k, ch in enumerate(word):
                rr, cc = (r, c + k) if d == "across" else (r + k, c)
                assert env.solution[rr][cc] == ch and env.board[rr][cc] == "_"
        assert env.total_letter_cells == sum(ch == "_" for row in env.board for ch in row)
        assert all(ch in "_." for row in env.board for ch in row)


def test_presets() -> None:
    assert (_env("easy").max_turns, _env("hard").max_turns) == (30, 40)
    env = _env("random")
    modes = set()
    for s in range(20):
        env.reset(seed=s)
        modes.add(env.hardcore)
        assert env.num_words == 3 and env.max_turns == (40 if env.hardcore else 30)
    assert modes == {True, False}


def test_letters_and_rewards() -> None:
    env = _env()
    env.reset(seed=3)
    cells = [(r, c) for r, row in enumerate(env.board) for c, ch in enumerate(row) if ch == "_"]
    n = len(cells)
    r0, c0 = cells[0]
    right = env.solution[r0][c0]
    wrong = "A" if right != "A" else "B"
    obs, r, te, tr, _ = env.step(f"\\boxed{{{r0} {c0} {wrong.lower()}}}")
    assert "incorrect" in obs and (r, te, tr) == (0.0, False, False)
    assert env.board[r0][c0] == "_"
    obs, r, te, tr, info = env.step(f"\\boxed{{{r0} {c0} {right.lower()}}}")
    assert "correctly" in obs and r == pytest.approx(1 / n)
    assert f" {right}  " in info["suffix"]
    obs, r, *_ = env.step(f"\\boxed{{{r0} {c0} {right}}}")
    assert "already filled" in obs and r == 0.0
    dot = next((r, c) for r, row in enumerate(env.board) for c, ch in enumerate(row) if ch == ".")
    obs, r, *_ = env.step(f"\\boxed{{{dot[0]} {dot[1]} E}}")
    assert "black dot" in obs and r == 0.0
    obs, r, *_ = env.step(r"\boxed{99 0 E}")
    assert "out of bounds" in obs and r == 0.0
    total = 1 / n
    for rr, cc in cells[1:]:
        _, r, te, tr, info = env.step(f"\\boxed{{{rr} {cc} {env.solution[rr][cc]}}}")
        total += r
    assert (te, tr) == (True, False) and info["success"] is True
    assert total == pytest.approx(1.0)


def test_format_errors_and_turn_limit() -> None:
    env = _env()
    for bad in ("0 0 A", r"\boxed{0 0 AB}", r"\boxed{[0 0 A]}", r"\boxed{0 A}"):
        env.reset(seed=0)
        assert env.step(bad)[1:4] == (-0.1, True, False)
    env = CrosswordsEnv(max_turns=1)
    env.reset(seed=0)
    obs, r, te, tr, info = env.step(r"\boxed{99 99 A}")
    assert (te, tr) == (False, True) and info["success"] is False


def test_determinism_and_random_action() -> None:
    a, b = _env("random"), _env("random")
    for s in range(10):
        assert a.reset(seed=s) == b.reset(seed=s)
        assert a.solution == b.solution
        assert "format_error" not in a.step(a.sample_random_action())[4]


def test_expert_solves_every_preset() -> None:
    for preset in ("easy", "hard", "random"):
        eps = list(
            gemgym.rollout(f"game:Crosswords-v0-{preset}", OracleAgent(), episodes=30, seed=0)
        )
        assert all(e.success for e in eps), preset
    rand = list(gemgym.rollout("game:Crosswords-v0-easy", RandomAgent(), episodes=30, seed=0))
    assert not any(e.success for e in rand)


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="num_words"):
        CrosswordsEnv(num_words=0)
    with pytest.raises(ConfigError, match="max_turns"):
        CrosswordsEnv(max_turns=0)
