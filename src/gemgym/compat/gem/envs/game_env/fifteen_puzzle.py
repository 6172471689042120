"""``gem.envs.game_env.fifteen_puzzle``: GEM's ``FifteenPuzzleEnv`` backed by gemgym's ``gemgym.envs.games.fifteen_puzzle:FifteenPuzzleEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["FifteenPuzzleEnv"]


class FifteenPuzzleEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.fifteen_puzzle:FifteenPuzzleEnv``."""

    gemgym_entry_point = "gemgym.envs.games.fifteen_puzzle:FifteenPuzzleEnv"
