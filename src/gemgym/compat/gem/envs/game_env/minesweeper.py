"""``gem.envs.game_env.minesweeper``: GEM's ``MinesweeperEnv`` backed by gemgym's ``gemgym.envs.games.minesweeper:MinesweeperEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["MinesweeperEnv"]


class MinesweeperEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.minesweeper:MinesweeperEnv``."""

    gemgym_entry_point = "gemgym.envs.games.minesweeper:MinesweeperEnv"
    gem_params = ("rows", "cols", "num_mines", "max_turns")
