"""Minesweeper: safe first reveal, flood fill, mines, flags, rewards and the expert."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.minesweeper import MinesweeperEnv, _mine_probabilities
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> MinesweeperEnv:
    env = gemgym.make(f"game:Minesweeper-v0-{preset}").unwrapped
    assert isinstance(env, MinesweeperEnv)
    return env


def _layout(env: MinesweeperEnv, mines: set[tuple[int, int]]) -> None:
    """Put the mines by hand (as after a first reveal) and number the other cells."""
    env.first_reveal = False
    cols = env.cols
    env.grid = [-1 if (i // cols, i % cols) in mines else 0 for i in range(env.rows * cols)]
    for i in range(len(env.grid)):
        if env.grid[i] != -1:
            r, c = divmod(i, cols)
            env.grid[i] = sum(
                (rr, cc) in mines for rr in (r - 1, r, r + 1) for cc in (c - 1, c, c + 1)
            )
    env.num_mines = len(mines)
    env.safe_left = env.rows * cols - len(mines)
    env._board = ""


def test_presets() -> None:
    for preset, size, mines, turns in (("easy", 5, 5, 25), ("hard", 8, 12, 64)):
        env = _env(preset)
        obs, info = env.reset(seed=0)
        assert (env.rows, env.cols, env.num_mines, env.max_turns) == (size, size, mines, turns)
        assert f"{mines} mines" in obs
        assert info["suffix"].startswith("Here is the current board layout:\n")
        assert info["suffix"].endswith("Enter your guess.")
        assert info["suffix"].count(" . ") == size * size
    env = _env("random")
    for s in range(30):
        env.reset(seed=s)
        n = env.rows
        assert 5 <= n <= 8 and env.cols == n
        assert (env.num_mines, env.max_turns) == (n * n // 5, n * n)


@pytest.mark.parametrize("seed", range(25))
def test_first_reveal_is_safe_and_floods(seed: int) -> None:
    env = _env("hard")
    env.reset(seed=seed)
    r, c = seed % 8, (seed * 3) % 8
    obs, reward, te, tr, info = env.step(f"\\boxed{{reveal {r} {c}}}")
    assert not te and "successfully revealed" in obs
    cell = r * 8 + c
    assert env.grid[cell] == 0  # nothing around the first cell: it opens an area
    assert sum(g == -1 for g in env.grid) == 12
    revealed = [i for i in range(64) if env.revealed[i]]
    assert len(revealed) > 1 and reward == pytest.approx(len(revealed) / (64 - 12))
    # flood fill: every revealed zero has all its neighbours revealed; no mine is revealed
    for i in revealed:
        assert env.grid[i] != -1
        if env.grid[i] == 0:
            rr, cc = divmod(i, 8)
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    if 0 <= rr + dr < 8 and 0 <= cc + dc < 8:
                        assert env.revealed[(rr + dr) * 8 + cc + dc]


def test_mine_ends_the_game_with_zero() -> None:
    env = _env()
    env.reset(seed=0)
    _layout(env, {(0, 0), (4, 4)})
    obs, r, te, tr, info = env.step(r"\boxed{reveal 0 0}")
    assert (r, te, tr) == (0.0, True, False) and info["success"] is False
    assert "hit a mine" in obs and " * " in info["suffix"]


def test_flood_fill_stops_at_numbers_and_flags() -> None:
    env = MinesweeperEnv(rows=3, cols=5, num_mines=1, max_turns=20)
    env.reset(seed=0)
    _layout(env, {(0, 4)})
    env.step(r"\boxed{flag 2 0}")
    obs, r, te, tr, _ = env.step(r"\boxed{reveal 2 2}")
    hidden = {(i // 5, i % 5) for i in range(15) if not env.revealed[i]}
    assert hidden == {(0, 4), (2, 0)}  # the mine and the flagged cell
    assert r == pytest.approx(13 / 14) and not te
    board = env.get_task_suffix()
    assert " F " in board and " 1 " in board
    env.step(r"\boxed{flag 2 0}")  # lift the flag, then reveal the last safe cell
    obs, r, te, tr, info = env.step(r"\boxed{reveal 2 0}")
    assert (te, tr) == (True, False) and info["success"] is True
    assert r == pytest.approx(1 / 14) and "Congratulations" in obs


def test_rewards_of_a_cleared_board_sum_to_one_without_flags() -> None:
    env = _env()
    env.reset(seed=3)
    total, done = 0.0, False
    env.step(r"\boxed{reveal 2 2}")
    total = sum(env.revealed) / 20
    while not done:
        safe = next(i for i in range(25) if not env.revealed[i] and env.grid[i] != -1)
        _, r, done, tr, info = env.step(f"\\boxed{{reveal {safe // 5} {safe % 5}}}")
        total += r
        assert not tr
    assert info["success"] is True and total == pytest.approx(1.0)


def test_invalid_moves() -> None:
    env = _env()
    env.reset(seed=0)
    obs, r, te, tr, info = env.step(r"\boxed{reveal 5 0}")
    assert "outside the bounds" in obs and (r, te, tr) == (0.0, False, False)
    obs, *_ = env.step(r"\boxed{dig 1 1}")
    assert "invalid action 'dig'" in obs
    env.step(r"\boxed{reveal 2 2}")
    obs, r, *_ = env.step(r"\boxed{reveal 2 2}")
    assert "already been revealed" in obs and r == 0.0
    obs, *_ = env.step(r"\boxed{flag 2 2}")
    assert "already been revealed" in obs
    hidden = next(i for i in range(25) if not env.revealed[i])
    env.step(f"\\boxed{{flag {hidden // 5} {hidden % 5}}}")
    obs, r, te, *_ = env.step(f"\\boxed{{REVEAL {hidden // 5} {hidden % 5}}}")
    assert "flagged" in obs and not te  # a flagged mine does not blow up


def test_format_errors_and_turn_limit() -> None:
    env = _env()
    for bad in ("reveal 1 1", r"\boxed{reveal 1}", r"\boxed{reveal a b}", r"\boxed{1 1}"):
        env.reset(seed=0)
        assert env.step(bad)[1:4] == (-0.1, True, False)
    env = MinesweeperEnv(rows=5, cols=5, num_mines=5, max_turns=2)
    env.reset(seed=0)
    env.step(r"\boxed{flag 0 0}")
    obs, r, te, tr, info = env.step(r"\boxed{flag 0 0}")
    assert (te, tr) == (False, True) and "maximum number of turns" in obs


def test_layout_depends_on_seed_and_first_cell_only() -> None:
    a, b = _env("hard"), _env("hard")
    a.reset(seed=7)
    b.reset(seed=7)
    for _ in range(5):
        a.sample_random_action()  # uses a's random stream, must not change its mines
    a.step(r"\boxed{reveal 3 3}")
    b.step(r"\boxed{reveal 3 3}")
    assert a.grid == b.grid
    layouts = set()
    for s in range(10):
        a.reset(seed=s)
        a.step(r"\boxed{reveal 3 3}")
        layouts.add(tuple(a.grid))
    assert len(layouts) == 10


def test_tiny_board_still_gets_its_mines() -> None:
    env = MinesweeperEnv(rows=3, cols=3, num_mines=1, max_turns=10)
    env.reset(seed=0)
    env.step(r"\boxed{reveal 1 1}")
    assert sum(g == -1 for g in env.grid) == 1 and env.grid[4] != -1


def test_random_action_is_well_formed() -> None:
    env = _env("random")
    for s in range(30):
        env.reset(seed=s)
        assert "format_error" not in env.step(env.sample_random_action())[4]


def test_expert_beats_random_by_far() -> None:
    for preset, floor in (("easy", 0.65), ("hard", 0.6), ("random", 0.65)):
        eps = list(
            gemgym.rollout(f"game:Minesweeper-v0-{preset}", OracleAgent(), episodes=60, seed=0)
        )
        assert sum(e.success for e in eps) / len(eps) >= floor, preset
        assert all(e.done for e in eps)
    rand = list(gemgym.rollout("game:Minesweeper-v0-easy", RandomAgent(), episodes=60, seed=0))
    assert sum(e.success for e in rand) <= 3


def test_expert_lifts_a_flag_on_its_chosen_cell() -> None:
    env = MinesweeperEnv(rows=3, cols=3, num_mines=1, max_turns=20)
    env.reset(seed=0)
    _layout(env, {(0, 0)})
    env.step(r"\boxed{flag 2 2}")
    env.step(r"\boxed{reveal 0 2}")  # opens everything but the mine and the flagged cell
    assert env.expert_action() == r"\boxed{flag 2 2}"
    env.step(env.expert_action())
    assert env.expert_action() == r"\boxed{reveal 2 2}"
    assert env.step(env.expert_action())[4]["success"] is True


def test_exact_mine_probabilities() -> None:
    # one number over two cells, no other cell: a coin flip
    assert _mine_probabilities([((1, 2), 1)], [1, 2], 1) == {1: 0.5, 2: 0.5}
    # two overlapping 1s and one mine in all: the shared cell
    assert _mine_probabilities([((1, 2), 1), ((2, 3), 1)], [1, 2, 3], 1) == {1: 0, 2: 1, 3: 0}
    # untouched cells share the mines the frontier leaves
    probs = _mine_probabilities([((1, 2), 1)], [1, 2, 8, 9], 2)
    assert probs == {1: 0.5, 2: 0.5, 8: 0.5, 9: 0.5}
    # layouts are weighted by the ways to place the other mines on untouched cells 5-7:
    # mine on 3 (3 ways for the second mine) vs mines on 4 and one of 1, 2 (1 way each)
    probs = _mine_probabilities([((1, 2, 3), 1), ((3, 4), 1)], [1, 2, 3, 4, 5, 6, 7], 2)
    assert probs == pytest.approx({1: 0.2, 2: 0.2, 3: 0.6, 4: 0.4, 5: 0.2, 6: 0.2, 7: 0.2})
    assert _mine_probabilities([((1, 2), 1)], [1, 2], 1, node_limit=1) is None


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="num_mines"):
        MinesweeperEnv(rows=3, cols=3, num_mines=9)
    with pytest.raises(ConfigError, match="grid"):
        MinesweeperEnv(rows=0, cols=3, num_mines=1)
