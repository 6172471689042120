"""``gem.envs.game_env.hangman``: GEM's ``HangmanEnv`` backed by gemgym's ``gemgym.envs.games.hangman:HangmanEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["HangmanEnv"]


class HangmanEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.games.hangman:HangmanEnv``."""

    gemgym_entry_point = "gemgym.envs.games.hangman:HangmanEnv"
    gem_params = ("word_length", "hardcore", "max_turns")
