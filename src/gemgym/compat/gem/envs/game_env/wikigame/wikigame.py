"""``gem.envs.game_env.wikigame.wikigame``: GEM's ``WikiGameEnv`` over gemgym's WikiGame.

GEM's ids ``game:WikiGame-v0-easy``/``-hard`` are gemgym's; the default backend is gemgym's
offline page set (``backend="inprocess"``), GEM's ``"kiwix"`` and ``"mw"`` (MediaWiki) are taken.
"""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["WikiGameEnv"]


class WikiGameEnv(AdaptedEnv):
    """GEM's constructor over gemgym's ``gemgym.envs.games.wikigame:WikiGameEnv``."""

    gemgym_entry_point = "gemgym.envs.games.wikigame:WikiGameEnv"
    gem_params = ("max_turns", "backend", "trawler_kwargs", "page_summary_length", "variant")
