"""Game2048: merges, log2-progress reward, GEM's presets, bugs fixed."""

from __future__ import annotations

import math

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.game2048 import Game2048Env, slide_line
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> Game2048Env:
    env = gemgym.make(f"game:Game2048-v0-{preset}").unwrapped
    assert isinstance(env, Game2048Env)
    return env


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ((2, 2, 2, 2), (4, 4, 0, 0)),
        ((4, 4, 8, 0), (8, 8, 0, 0)),  # no double merge: 4+4=8 does not merge with the 8
        ((2, 0, 0, 2), (4, 0, 0, 0)),
        ((2, 2, 2, 0), (4, 2, 0, 0)),  # the leading pair merges first
        ((2, 4, 8, 16), (2, 4, 8, 16)),
        ((0, 0, 0, 0), (0, 0, 0, 0)),
    ],
)
def test_slide_line(line: tuple[int, ...], expected: tuple[int, ...]) -> None:
    assert slide_line(line) == expected


def _set(env: Game2048Env, rows: list[list[int]], start_max: int = 2) -> None:
    env.board = tuple(v for row in rows for v in row)
    env.max_tile_achieved = env.init_max_tile = start_max


def test_moves_in_all_directions() -> None:
    env = _env()
    env.reset(seed=0)
    rows = [[2, 2, 2, 2], [0, 0, 0, 0], [0, 0, 0, 0], [2, 0, 0, 0]]
    _set(env, rows)
    env.step(r"\boxed{right}")
    assert env.board[:4] == (0, 0, 4, 4)
    _set(env, rows)
    env.step(r"\boxed{DOWN}")
    col0 = env.board[0::4]
    assert col0[3] == 4  # the two 2s of column 0 merged at the bottom


def test_move_that_changes_nothing_is_invalid() -> None:
    env = _env()
    env.reset(seed=0)
    _set(env, [[2, 4, 8, 16], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    before = env.board
    obs, r, te, tr, _ = env.step(r"\boxed{left}")
    assert "doesn't change the board" in obs
    assert (r, te, tr) == (0.0, False, False)
    assert env.board == before  # no tile spawned either


def test_move_spawns_one_tile() -> None:
    env = _env()
    env.reset(seed=5)
    _set(env, [[2, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    env.step(r"\boxed{right}")
    assert sum(1 for v in env.board if v) == 2
    assert sorted(v for v in env.board if v)[0] in (2, 4)


def test_log2_progress_reward_sums_to_one_on_win() -> None:
    env = _env()  # target 64
    env.reset(seed=0)
    _set(env, [[8, 8, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], start_max=2)
    _, r, te, _, _ = env.step(r"\boxed{left}")  # max 2 -> 16: (4 - 1) / (6 - 1)
    assert r == pytest.approx(3 / 5) and not te
    assert env.max_tile_achieved == 16
    env.board = (16, 16, 32, 0, *([0] * 12))
    _, r, te, _, _ = env.step(r"\boxed{left}")  # 32 + 32 not merged twice: max 32
    assert r == pytest.approx(1 / 5) and not te
    env.board = (32, 32, *([0] * 14))
    _, r, te, tr, info = env.step(r"\boxed{left}")  # 64: the last fifth, a win
    assert r == pytest.approx(1 / 5)
    assert (te, tr) == (True, False) and info["success"] is True


def test_progress_reward_is_capped_at_the_target() -> None:
    env = Game2048Env(target_tile=16, max_turns=20)
    env.reset(seed=0)
    _set(env, [[32, 32, 0, 0], [0] * 4, [0] * 4, [0] * 4], start_max=2)
    _, r, te, _, _ = env.step(r"\boxed{left}")
    assert r == pytest.approx(1.0) and te
    assert math.isclose(r, (math.log2(16) - 1) / (math.log2(16) - 1))


def test_game_over_terminates_without_success() -> None:
    env = _env()
    env.reset(seed=0)
    # "left" merges the 2s of the last row; whatever spawns (2 or 4) no move is left after it
    _set(env, [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 8], [2, 2, 16, 32]], start_max=32)
    obs, r, te, tr, info = env.step(r"\boxed{left}")
    assert env.board[12:15] == (4, 16, 32)
    assert obs == "Game over! No more moves possible."
    assert (r, te, tr) == (0.0, True, False) and info["success"] is False


def test_turn_limit_truncates_only() -> None:
    env = _env("hard")
    env.reset(seed=0)
    out = None
    for _ in range(50):
        out = env.step(env.expert_action())
        if out[2] or out[3]:
            break
    assert out is not None
    assert (out[2], out[3]) == (False, True) and out[4]["success"] is False


def test_random_preset_and_determinism() -> None:
    env = _env("random")
    seen = set()
    for s in range(40):
        env.reset(seed=s)
        seen.add((env.target_tile, env.max_turns))
    assert seen == {(16, 20), (32, 30), (64, 50)}
    a, b = _env(), _env()
    assert a.reset(seed=9)[1] == b.reset(seed=9)[1]
    for _ in range(10):
        assert a.step(r"\boxed{up}")[:4] == b.step(r"\boxed{up}")[:4]
        a.step(r"\boxed{left}")
        b.step(r"\boxed{left}")
    assert a.board == b.board


def test_sampling_random_actions_does_not_change_the_spawns() -> None:
    a, b = _env(), _env()
    a.reset(seed=4)
    b.reset(seed=4)
    for _ in range(5):
        a.sample_random_action()
    for d in ("up", "left", "down", "right"):
        assert a.step(f"\\boxed{{{d}}}")[:4] == b.step(f"\\boxed{{{d}}}")[:4]


def test_presets() -> None:
    for preset, target, turns in [("easy", 64, 50), ("hard", 512, 50), ("extreme-hard", 2048, 100)]:
        env = _env(preset)
        obs, info = env.reset(seed=0)
        assert (env.target_tile, env.max_turns) == (target, turns)
        assert f"reach the {target} tile" in obs
        assert info["suffix"].startswith("Current board:\n")
        assert sum(1 for v in env.board if v) == 2


def test_oracle_beats_random_on_easy() -> None:
    oracle = list(gemgym.rollout("game:Game2048-v0-easy", OracleAgent(), episodes=20, seed=0))
    rand = list(gemgym.rollout("game:Game2048-v0-easy", RandomAgent(), episodes=100, seed=0))
    oracle_rate = sum(e.success for e in oracle) / len(oracle)
    rand_rate = sum(e.success for e in rand) / len(rand)
    assert oracle_rate >= 0.9
    assert rand_rate <= 0.6


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="power of two"):
        Game2048Env(target_tile=100)
    with pytest.raises(ConfigError, match="board_size"):
        Game2048Env(board_size=1)
