"""``gem.envs.game_env.sudoku``: GEM's ``SudokuEnv`` backed by gemgym's ``gemgym.envs.games.sudoku:SudokuEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["SudokuEnv"]


class SudokuEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.sudoku:SudokuEnv``."""

    gemgym_entry_point = "gemgym.envs.games.sudoku:SudokuEnv"
    gem_params = ("clues", "max_turns", "scale")
