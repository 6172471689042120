"""Sokoban: pushes, walls, box-into-box, solvable generated levels, A* expert."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent, RandomAgent
from gemgym.envs.games.sokoban import SokobanEnv
from gemgym.errors import ConfigError


def _env(preset: str = "easy") -> SokobanEnv:
    env = gemgym.make(f"game:Sokoban-v0-{preset}").unwrapped
    assert isinstance(env, SokobanEnv)
    return env


def _room(env: SokobanEnv, rows: list[str]) -> None:
    """Set a hand-made room: # wall, _ floor, O target, X box, √ box on target, P player."""
    env.dim_room = (len(rows), len(rows[0]))
    cells = "".join(rows)
    env.walls = frozenset(i for i, ch in enumerate(cells) if ch == "#")
    env.targets = frozenset(i for i, ch in enumerate(cells) if ch in "O√")
    env.boxes = frozenset(i for i, ch in enumerate(cells) if ch in "X√")
    env.player = cells.index("P")
    env.num_boxes = len(env.boxes)
    env._plan_state = None


def test_push_moves_the_box() -> None:
    env = _env()
    env.reset(seed=0)
    _room(env, ["######", "#PX_O#", "#____#", "#____#", "#____#", "######"])
    obs, r, te, tr, info = env.step(r"\boxed{right}")
    assert obs == "At turn 1, you pushed a box while you moved right."
    assert (r, te, tr) == (0.0, False, False)
    assert env.player == 8 and env.boxes == {9}
    obs, r, te, tr, info = env.step(r"\boxed{right}")
    assert (r, te, tr) == (1.0, True, False) and info["success"] is True
    assert "√" in info["suffix"]


def test_walls_and_box_into_wall_or_box_are_blocked() -> None:
    env = _env()
    env.reset(seed=0)
    _room(env, ["######", "#P_XX#", "#X___#", "#_O_O#", "#___O#", "######"])
    before = (env.player, env.boxes)
    obs, r, te, tr, _ = env.step(r"\boxed{up}")  # wall
    assert "collide with wall or other boxes" in obs and (r, te, tr) == (0.0, False, False)
    assert (env.player, env.boxes) == before
    env.step(r"\boxed{right}")  # walk next to the two boxes
    obs, *_ = env.step(r"\boxed{right}")  # box into box
    assert "collide" in obs
    env.step(r"\boxed{left}")
    env.step(r"\boxed{down}")  # push the box at (2,1) down to (3,1)
    env.step(r"\boxed{down}")  # then again to (4,1)
    assert env.boxes == {9, 10, 4 * 6 + 1} and env.player == 3 * 6 + 1
    obs, *_ = env.step(r"\boxed{down}")  # box into the bottom wall
    assert "collide" in obs and env.player == 3 * 6 + 1


def test_turn_limit_partial_credit() -> None:
    env = _env()
    env.reset(seed=0)
    _room(env, ["######", "#P√_O#", "#__X_#", "#____#", "#____#", "######"])
    for _ in range(19):
        env.step(r"\boxed{up}")
    obs, r, te, tr, info = env.step(r"\boxed{up}")
    assert (te, tr) == (False, True)
    assert r == pytest.approx(0.5) and info["success"] is False


def test_format_error() -> None:
    env = _env()
    env.reset(seed=0)
    assert env.step(r"\boxed{north}")[1:4] == (-0.1, True, False)


@pytest.mark.parametrize(
    ("preset", "rows", "boxes", "turns"), [("easy", 6, 2, 20), ("hard", 8, 4, 50)]
)
def test_generated_levels_are_solvable_within_the_turn_limit(
    preset: str, rows: int, boxes: int, turns: int
) -> None:
    env = _env(preset)
    for s in range(15):
        _, info = env.reset(seed=s)
        assert env.dim_room == (rows, rows) and env.max_turns == turns
        assert len(env.boxes) == len(env.targets) == boxes
        assert not env.boxes & env.targets  # every box starts off the targets
        assert env.player not in env.boxes and env.player not in env.walls
        plan = env.solve()
        assert plan is not None and 0 < len(plan) <= turns
        board = info["suffix"].splitlines()[1:-2]
        assert len(board) == rows and all(line.split()[0] == "#" for line in board)
        assert sum(line.count("X") for line in board) == boxes


def test_generation_path_replays_to_a_solution() -> None:
    env = _env("hard")
    env.reset(seed=7)
    for move in list(env._generation_plan):
        _, r, te, tr, _ = env.step(f"\\boxed{{{move}}}")
        if te:
            break
    assert r == 1.0 and te and not tr


def test_random_preset_uses_gem_candidates_and_seeds_repeat() -> None:
    env = _env("random")
    seen = set()
    for s in range(20):
        env.reset(seed=s)
        seen.add((env.dim_room, env.num_boxes, env.max_turns))
    assert seen == {((6, 6), 2, 20), ((8, 8), 5, 50)}
    a, b = _env(), _env()
    assert a.reset(seed=11) == b.reset(seed=11)


@pytest.mark.parametrize("preset", ["easy", "hard", "random"])
def test_oracle_always_solves(preset: str) -> None:
    eid = f"game:Sokoban-v0-{preset}"
    assert all(e.success for e in gemgym.rollout(eid, OracleAgent(), episodes=15, seed=0))


def test_random_agent_rarely_solves() -> None:
    rand = list(gemgym.rollout("game:Sokoban-v0-easy", RandomAgent(), episodes=50, seed=0))
    assert sum(e.success for e in rand) <= 15


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="dim_room"):
        SokobanEnv(dim_room=(3, 3))
    with pytest.raises(ConfigError, match="num_boxes"):
        SokobanEnv(dim_room=(6, 6), num_boxes=9)
