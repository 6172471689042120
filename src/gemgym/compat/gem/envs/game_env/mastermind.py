"""``gem.envs.game_env.mastermind``: GEM's ``MastermindEnv`` backed by gemgym's ``gemgym.envs.games.mastermind:MastermindEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["MastermindEnv"]


class MastermindEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.mastermind:MastermindEnv``."""

    gemgym_entry_point = "gemgym.envs.games.mastermind:MastermindEnv"
    gem_params = ("code_length", "num_numbers", "duplicate_numbers", "max_turns")
