"""What the integration tests share: a multi-turn env whose reward depends on the model's text."""

from __future__ import annotations

from typing import Any

from helpers.envs import CountingEnv


class VarietyEnv(CountingEnv):
    """Three turns; each reply earns the share of distinct characters it uses (the reward
    depends on what the model wrote, so episodes of one group differ)."""

    def __init__(self) -> None:
        super().__init__(episode_length=3)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, _, terminated, truncated, info = self._advance()
        return obs, len(set(action)) / 10.0, terminated, truncated, info
