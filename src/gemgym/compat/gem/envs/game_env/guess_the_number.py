"""``gem.envs.game_env.guess_the_number``: GEM's ``GuessTheNumberEnv`` backed by gemgym's ``gemgym.envs.games.guess_the_number:GuessTheNumberEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["GuessTheNumberEnv"]


class GuessTheNumberEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.guess_the_number:GuessTheNumberEnv``."""

    gemgym_entry_point = "gemgym.envs.games.guess_the_number:GuessTheNumberEnv"
    gem_params = ("min_number", "max_number", "max_turns")
