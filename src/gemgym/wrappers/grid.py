"""A compact board as the observation, for small models on grid games.

A game's own observation is the message of the last move; its board is ``info["suffix"]``, laid
out for a reader (headers, spacing, prose), about 200 bytes a turn on a 5×5 board.
:class:`GridObservation` replaces the observation with the board alone, one row a line, one
character a cell and nothing else (29 bytes on Minesweeper-easy, 19 on Sudoku-easy), so that a
whole episode fits the context of a small model. It is what ``gemgym train --wrappers grid``
trains on (docs/results.md).

========================  ==================================================================
``game:Minesweeper-v0-*``  ``.`` hidden, ``F`` flag, ``0``–``8`` a revealed cell's count,
                           ``*`` the mine that ended the game;
                           rows and columns are numbered from 0 (the action's numbering)
``game:Sudoku-v0-*``       ``.`` empty, a digit filled (``1``–``9``); rows and columns are
                           numbered from 1 in the action
========================  ==================================================================

The rules text of ``reset`` is dropped too: a policy trained on the grid learns the action
format from its warm start (or from ``message=True``, which keeps the env's text above the grid).
Rewards, termination and ``info`` are the env's own, less ``info["suffix"]`` (the grid replaces
the board there too, in what an agent is shown).

>>> import gemgym
>>> from gemgym.wrappers.grid import GridObservation
>>> env = GridObservation(gemgym.make("game:Sudoku-v0-easy"))
>>> obs, info = env.reset(seed=1)
>>> print(obs)
.34.
2..1
....
42..
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gemgym.core import Env, StepResult, Wrapper
from gemgym.errors import ConfigError

__all__ = ["GRID_GAMES", "GridObservation", "grid_text"]


def _minesweeper(env: Any) -> str:
    cols = env.cols
    revealed, flags, grid = env.revealed, env.flags, env.grid
    cells = [
        ("*" if grid[i] < 0 else str(grid[i])) if revealed[i] else ("F" if flags[i] else ".")
        for i in range(len(grid))
    ]
    return "\n".join("".join(cells[r : r + cols]) for r in range(0, len(cells), cols))


def _sudoku(env: Any) -> str:
    s = env.scale
    cells = [str(d) if d else "." for d in env.board]
    return "\n".join("".join(cells[r : r + s]) for r in range(0, len(cells), s))


GRID_GAMES: dict[str, Callable[[Any], str]] = {
    "MinesweeperEnv": _minesweeper,
    "SudokuEnv": _sudoku,
}
"""The games :class:`GridObservation` renders, by env class name, with their renderer."""


def grid_text(env: Env[Any, Any]) -> str:
    """The compact board of ``env`` (any wrapper of a game in :data:`GRID_GAMES`)."""
    base = env.unwrapped
    render = GRID_GAMES.get(type(base).__name__)
    if render is None:
        raise ConfigError(
            f"GridObservation renders the boards of {sorted(GRID_GAMES)} "
            f"(game:Minesweeper-v0-*, game:Sudoku-v0-*), not {type(base).__name__}"
        )
    return render(base)


class GridObservation(Wrapper[Any, Any, str, Any]):
    """Observation = the env's board, one row a line and one character a cell.

    Args:
        env: a Minesweeper or Sudoku env (or a wrapper of one).
        message: keep the env's own text (the rules at reset, the last move's outcome after
            a step) on the lines above the grid.
    """

    def __init__(self, env: Env[Any, Any], *, message: bool = False) -> None:
        super().__init__(env)
        grid_text(env)  # fails now, not at the first reset, for a game it cannot render
        self.message = message

    def _render(self, obs: Any) -> str:
        grid = grid_text(self.env)
        return f"{obs}\n{grid}" if self.message else grid

    def after_reset(self, obs: Any, info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return self._render(obs), _without_suffix(info)

    def after_step(self, action: Any, result: StepResult[Any]) -> StepResult[str]:
        obs, reward, terminated, truncated, info = result
        return self._render(obs), reward, terminated, truncated, _without_suffix(info)


def _without_suffix(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` less the env's own board (``suffix``): the grid replaces it, also in what an
    agent is shown (:func:`gemgym.prompting.model_view` appends the suffix)."""
    if "suffix" not in info:
        return info
    return {k: v for k, v in info.items() if k != "suffix"}
