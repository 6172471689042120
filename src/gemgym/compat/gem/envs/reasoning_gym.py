"""``gem.envs.reasoning_gym``: GEM's ``ReasoningGymEnv`` backed by gemgym's ``gemgym.envs.reasoning_gym:ReasoningGymEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["ReasoningGymEnv"]


class ReasoningGymEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.reasoning_gym:ReasoningGymEnv``."""

    gemgym_entry_point = "gemgym.envs.reasoning_gym:ReasoningGymEnv"
    gem_params = ("name", "size", "seed")
