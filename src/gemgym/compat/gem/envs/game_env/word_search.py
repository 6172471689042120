"""``gem.envs.game_env.word_search``: GEM's ``WordSearchEnv`` backed by gemgym's ``gemgym.envs.games.word_search:WordSearchEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["WordSearchEnv"]


class WordSearchEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.word_search:WordSearchEnv``."""

    gemgym_entry_point = "gemgym.envs.games.word_search:WordSearchEnv"
    gem_params = ("hardcore", "max_turns", "num_words")
