"""``gem.envs.game_env.wordle``: GEM's ``WordleEnv`` backed by gemgym's ``gemgym.envs.games.wordle:WordleEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["WordleEnv"]


class WordleEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.wordle:WordleEnv``."""

    gemgym_entry_point = "gemgym.envs.games.wordle:WordleEnv"
    gem_params = ("word_length", "only_real_words", "max_turns")
