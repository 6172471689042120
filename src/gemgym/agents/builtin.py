"""Agents that ask the env: :class:`RandomAgent` and :class:`OracleAgent`.

Both read their moves through the vector env that plays the episodes (:func:`call_slots`), so
they run on every backend, including worker processes and Ray actors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gemgym.agents.base import BaseAgent, call_slots

if TYPE_CHECKING:
    from gemgym.vector import VectorEnv

__all__ = ["OracleAgent", "RandomAgent"]


class RandomAgent(BaseAgent):
    """Plays ``env.sample_random_action()``: well-formed, uninformed actions (a baseline)."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        return call_slots(venv, "sample_random_action", slots)


class OracleAgent(BaseAgent):
    """Plays ``env.expert_action()``: the env's built-in expert (an upper baseline)."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        return call_slots(venv, "expert_action", slots)
