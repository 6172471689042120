"""``gem.envs.game_env.sokoban.sokoban``: GEM's ``SokobanEnv`` backed by gemgym's ``gemgym.envs.games.sokoban:SokobanEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["SokobanEnv"]


class SokobanEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.sokoban:SokobanEnv``."""

    gemgym_entry_point = "gemgym.envs.games.sokoban:SokobanEnv"
    gem_params = ("dim_room", "max_turns", "num_boxes")
