"""``gem.envs.game_env.crosswords.crosswords``: GEM's ``CrosswordsEnv`` backed by gemgym's ``gemgym.envs.games.crosswords:CrosswordsEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["CrosswordsEnv"]


class CrosswordsEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.crosswords:CrosswordsEnv``."""

    gemgym_entry_point = "gemgym.envs.games.crosswords:CrosswordsEnv"
    gem_params = ("hardcore", "max_turns", "num_words")
