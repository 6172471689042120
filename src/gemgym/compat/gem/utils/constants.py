"""``gem.utils.constants``: ``TERMINAL_STATE`` and ``LanguageGameReward``."""

from __future__ import annotations

from gemgym.envs.dataset import TERMINAL_STATE

__all__ = ["TERMINAL_STATE", "LanguageGameReward"]


class LanguageGameReward:
    """GEM's reward constants of the language games."""

    success_reward: float = 1.0
    internal_step_reward: float = 0.0
    fail_reward: float = 0.0
    invalid_action_reward: float = 0.0
    format_error_reward: float = -0.1
