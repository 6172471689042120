"""``gem.envs.game_env.wikigame.rewards``: GEM's ``WikiGameReward`` (the values gemgym's
WikiGame pays)."""

from __future__ import annotations

from gemgym.compat.gem.utils.constants import LanguageGameReward
from gemgym.envs.games import wikigame as _wikigame

__all__ = ["WikiGameReward"]


class WikiGameReward(LanguageGameReward):
    """GEM's WikiGame rewards."""

    success_reward: float = _wikigame.SUCCESS_REWARD
    internal_step_reward: float = _wikigame.INTERNAL_STEP_REWARD
    fail_reward: float = _wikigame.FAIL_REWARD
    invalid_action_reward: float = _wikigame.INVALID_ACTION_REWARD
    format_error_reward: float = _wikigame.FORMAT_ERROR_REWARD
