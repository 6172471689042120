"""``gem.envs.qa_env``: GEM's ``QaEnv`` backed by gemgym's ``gemgym.envs.qa:QaEnv``."""

from __future__ import annotations

from gemgym.compat.gem._adapt import AdaptedEnv

__all__ = ["QaEnv"]


class QaEnv(AdaptedEnv):
    """GEM's constructor keywords over gemgym's ``gemgym.envs.qa:QaEnv``."""

    gemgym_entry_point = "gemgym.envs.qa:QaEnv"
    no_answer_reward = 0.0  # GEM's reward for a reply without an answer (gemgym's: -0.1)
