"""``gem.wrappers.episode_tracking_wrapper``: steps and return so far, in ``info``.

``info["step_counter"]`` and ``info["cumulative_rewards"]`` after every step; on reset also
``prev_ep_step_counter`` and ``prev_ep_cumulative_rewards`` (the episode that just ended). GEM's
keys; gemgym's :class:`~gemgym.wrappers.EpisodeStatistics` reports ``info["episode"]`` at the end.
"""

from __future__ import annotations

from typing import Any

from gemgym.compat.gem.core import EnvWrapper

__all__ = ["EpisodeTrackingWrapper"]


class EpisodeTrackingWrapper(EnvWrapper):
    """Count steps and sum rewards per episode (GEM's info keys)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.step_counter = 0
        self.cumulative_rewards = 0.0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        prev_steps, prev_return = self.step_counter, self.cumulative_rewards
        obs, info = self.env.reset(seed=seed, **kwargs)
        self.step_counter = 0
        self.cumulative_rewards = 0.0
        info = dict(info)
        info.update(
            step_counter=0,
            prev_ep_step_counter=prev_steps,
            cumulative_rewards=0.0,
            prev_ep_cumulative_rewards=prev_return,
        )
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_counter += 1
        self.cumulative_rewards += float(reward)
        info = dict(info)
        info["step_counter"] = self.step_counter
        info["cumulative_rewards"] = self.cumulative_rewards
        return obs, reward, terminated, truncated, info
