"""GridObservation: the board alone, one row a line, for small models on grid games."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.errors import ConfigError
from gemgym.rl.collector import Collector
from gemgym.wrappers.factory import get_wrapper_fns
from gemgym.wrappers.grid import GridObservation


def test_sudoku_board_one_row_a_line() -> None:
    env = GridObservation(gemgym.make("game:Sudoku-v0-easy"))
    obs, _ = env.reset(seed=1)
    assert obs == ".34.\n2..1\n....\n42.."
    obs, reward, terminated, truncated, _ = env.step(r"\boxed{1 1 1}")
    assert obs == "134.\n2..1\n....\n42.."  # the digit is on the board
    assert reward > 0 and not terminated and not truncated


def test_minesweeper_board_after_the_first_reveal() -> None:
    env = GridObservation(gemgym.make("game:Minesweeper-v0-easy"))
    obs, _ = env.reset(seed=1)
    assert obs == "\n".join(["....."] * 5)
    obs, reward, *_ = env.step(r"\boxed{reveal 2 2}")
    assert obs == ".....\n2212.\n0001.\n0012.\n001.."
    assert reward > 0
    obs, *_ = env.step(r"\boxed{flag 0 4}")
    assert obs.splitlines()[0] == "....F"


def test_message_keeps_the_env_text_above_the_grid() -> None:
    env = GridObservation(gemgym.make("game:Sudoku-v0-easy"), message=True)
    env.reset(seed=1)
    obs, *_ = env.step(r"\boxed{1 1 1}")
    text, grid = obs.split("\n", 1)
    assert "correct" in text and grid == "134.\n2..1\n....\n42.."


def test_a_game_without_a_grid_renderer_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="Minesweeper"):
        GridObservation(gemgym.make("game:GuessTheNumber-v0-easy"))


def test_the_factory_name_and_the_collector() -> None:
    seen: list[str] = []

    def policy(observations: list[str]) -> list[str]:
        seen.extend(observations)
        return [r"\boxed{reveal 2 2}"] * len(observations)

    with Collector(
        "game:Minesweeper-v0-easy",
        policy,
        num_envs=2,
        seed=3,
        wrappers=get_wrapper_fns("grid"),
    ) as col:
        batch = col.collect(2)
    assert len(batch.episodes) == 2
    # every observation the policy saw is a 5x5 grid
    assert seen and all(len(o.splitlines()) == 5 for o in seen)


def test_the_trainer_refuses_an_unknown_wrapper_name() -> None:
    from gemgym.rl.trainer.config import RunConfig

    with pytest.raises(ConfigError, match="grid"):
        RunConfig(updates=1, wrappers="gird")
