"""FifteenPuzzle: solvable boards, GEM's move semantics and rewards, A* expert."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.fifteen_puzzle import FifteenPuzzleEnv, is_solvable
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> FifteenPuzzleEnv:
    env = gemgym.make(f"game:FifteenPuzzle-v0-{preset}").unwrapped
    assert isinstance(env, FifteenPuzzleEnv)
    return env


def test_solvability_rule() -> None:
    assert is_solvable((1, 2, 3, 0), 2)
    assert not is_solvable((2, 1, 3, 0), 2)
    assert is_solvable((1, 2, 3, 4, 5, 6, 7, 8, 0), 3)
    assert not is_solvable((1, 2, 3, 4, 5, 6, 8, 7, 0), 3)
    # 4x4: the classic unsolvable "14-15" swap
    assert not is_solvable((*range(1, 14), 15, 14, 0), 4)
    assert is_solvable((*range(1, 12), 0, 13, 14, 15, 12), 4)


@pytest.mark.parametrize(("preset", "n"), [("easy", 2), ("hard", 4), ("random", None)])
def test_boards_are_solvable_unsolved_and_complete(preset: str, n: int | None) -> None:
    env = _env(preset)
    for s in range(200):
        env.reset(seed=s)
        size = env.num_rows
        if n is not None:
            assert size == n
        assert sorted(env.board) == list(range(size * size))
        assert is_solvable(env.board, size)
        assert env.board != (*range(1, size * size), 0)


def test_all_twelve_solvable_2x2_boards_appear() -> None:
    env = _env()
    seen = set()
    for s in range(400):
        env.reset(seed=s)
        seen.add(env.board)
    assert len(seen) == 11  # the 12 solvable arrangements minus the solved one


def _place(env: FifteenPuzzleEnv, board: tuple[int, ...]) -> None:
    env.board = board
    env._plan_board = None


def test_move_semantics_and_edges() -> None:
    env = _env()
    env.reset(seed=0)
    _place(env, (1, 2, 0, 3))  # empty bottom-left
    obs, r, te, tr, _ = env.step(r"\boxed{down}")  # the tile above (1) slides down
    assert env.board == (0, 2, 1, 3)
    assert obs == "At turn 1, you made a valid move: down." and (r, te, tr) == (0.0, False, False)
    obs, r, te, tr, _ = env.step(r"\boxed{down}")  # nothing above the empty cell now
    assert "outside the bounds" in obs and (r, te, tr) == (0.0, False, False)
    assert env.board == (0, 2, 1, 3)
    obs, r, *_ = env.step(r"\boxed{right}")  # nothing on the left of the empty cell
    assert "outside the bounds" in obs
    env.step(r"\boxed{LEFT}")  # the tile on the right (2) slides left
    assert env.board == (2, 0, 1, 3)
    env.step(r"\boxed{up}")  # the tile below (3) slides up
    assert env.board == (2, 3, 1, 0)


def test_solving_terminates_with_one() -> None:
    env = _env()
    env.reset(seed=0)
    _place(env, (1, 2, 0, 3))
    obs, r, te, tr, info = env.step(r"\boxed{left}")
    assert env.board == (1, 2, 3, 0)
    assert (r, te, tr) == (1.0, True, False) and info["success"] is True
    assert "solved" in obs


def test_turn_limit_gives_fraction_in_place() -> None:
    env = _env()
    env.reset(seed=0)
    _place(env, (0, 2, 1, 3))
    for _ in range(9):
        env.step(r"\boxed{down}")  # off the board every time
    obs, r, te, tr, info = env.step(r"\boxed{down}")
    assert (te, tr) == (False, True)
    assert r == pytest.approx(1 / 4)  # only the 2 is in place
    assert info["success"] is False


def test_format_error() -> None:
    env = _env()
    env.reset(seed=0)
    assert env.step("up")[1:4] == (-0.1, True, False)


def test_suffix_shows_the_board() -> None:
    env = _env("hard")
    _, info = env.reset(seed=0)
    lines = info["suffix"].splitlines()
    assert lines[0] == "Here is the current board layout: "
    assert len(lines[1].split()) == 4 and "__" in info["suffix"]


def test_expert_is_optimal_on_3x3() -> None:
    env = FifteenPuzzleEnv(num_rows=3, max_turns=40)
    env.reset(seed=0)
    _place(env, (1, 2, 3, 4, 5, 6, 0, 7, 8))  # two moves from the goal
    assert env.expert_action() == r"\boxed{left}"
    env.step(r"\boxed{left}")
    _, r, te, *_ = env.step(env.expert_action())
    assert r == 1.0 and te


@pytest.mark.parametrize(("preset", "floor"), [("easy", 1.0), ("random", 0.3)])
def test_oracle_success_floor(preset: str, floor: float) -> None:
    eid = f"game:FifteenPuzzle-v0-{preset}"
    eps = list(gemgym.rollout(eid, OracleAgent(), episodes=30, seed=0))
    assert sum(e.success for e in eps) / len(eps) >= floor
    rand = list(gemgym.rollout(eid, RandomAgent(), episodes=30, seed=0))
    assert sum(e.success for e in rand) < sum(e.success for e in eps)


def test_hard_expert_plays_legal_moves_quickly() -> None:
    env = _env("hard")
    env.reset(seed=1)
    start = env.board
    _, r, *_ = env.step(env.expert_action())
    assert env.board != start  # the move was on the board


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="num_rows"):
        FifteenPuzzleEnv(num_rows=1)
