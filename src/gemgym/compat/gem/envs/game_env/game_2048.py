"""``gem.envs.game_env.game_2048``: GEM's ``Game2048Env`` backed by gemgym's ``gemgym.envs.games.game2048:Game2048Env``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["Game2048Env"]


class Game2048Env(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.game2048:Game2048Env``."""

    gemgym_entry_point = "gemgym.envs.games.game2048:Game2048Env"
    gem_params = ("target_tile", "max_turns", "board_size")
