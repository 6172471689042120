"""``gem.envs.game_env.tower_of_hanoi``: GEM's ``TowerofHanoiEnv`` backed by gemgym's ``gemgym.envs.games.tower_of_hanoi:TowerofHanoiEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["TowerofHanoiEnv"]


class TowerofHanoiEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.tower_of_hanoi:TowerofHanoiEnv``."""

    gemgym_entry_point = "gemgym.envs.games.tower_of_hanoi:TowerofHanoiEnv"
    gem_params = ("num_disks", "max_turns")
