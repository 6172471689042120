"""Agents that ask the env: :class:`RandomAgent` and :class:`OracleAgent`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gemgym.agents.base import BaseAgent
from gemgym.core import Env

__all__ = ["OracleAgent", "RandomAgent"]


class RandomAgent(BaseAgent):
    """Plays ``env.sample_random_action()``: well-formed, uninformed actions (a baseline)."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        envs: Sequence[Env[Any, Any]],
        slots: Sequence[int],
    ) -> list[Any]:
        return [env.sample_random_action() for env in envs]


class OracleAgent(BaseAgent):
    """Plays ``env.expert_action()``: the env's built-in expert (an upper baseline)."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        envs: Sequence[Env[Any, Any]],
        slots: Sequence[int],
    ) -> list[Any]:
        return [env.expert_action() for env in envs]
