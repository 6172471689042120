"""``gem.envs.webshop.webshop``: GEM's ``WebshopEnv`` over gemgym's WebShop env.

GEM's ids ``webshop:{train,test}-{html,text,text_rich}`` are gemgym's (the same keyword
arguments); the class keeps GEM's constructor defaults (``error_tolerance=0``,
``format_error_reward=0``; the registered ids set 15 and -0.1, as GEM's do).
"""

from __future__ import annotations

from typing import Any

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["WebshopEnv"]


class WebshopEnv(AdaptedEnv):
    """GEM's constructor over gemgym's ``gemgym.envs.webshop.env:WebShopEnv``."""

    gemgym_entry_point = "gemgym.envs.webshop.env:WebShopEnv"
    gem_params = (
        "observation_mode",
        "split",
        "max_turns",
        "show_attrs",
        "session",
        "session_prefix",
        "error_tolerance",
        "format_error_reward",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        named = dict(zip(self.gem_params, args, strict=False))
        if "error_tolerance" not in named:
            kwargs.setdefault("error_tolerance", 0)
        if "format_error_reward" not in named:
            kwargs.setdefault("format_error_reward", 0)
        super().__init__(*args, **kwargs)
