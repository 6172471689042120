"""Agents that ask the env: :class:`RandomAgent` and :class:`OracleAgent`.

Both read their moves from the env that plays the episode, and make no model request. They take
each of gemgym's two forms of a player:

* an :class:`~gemgym.agents.Agent` (``act(observations, slots=, venv=)``): the moves read
  through the vector env that plays the episodes (:func:`call_slots`), so they run on every
  backend, including worker processes and Ray actors;
* a :class:`~gemgym.episodes.BatchPolicy` of the episode engine (``act_batch(requests)``): each
  episode's env asked through the capability it grants (:class:`~gemgym.episodes.EnvAccess`),
  each turn an :class:`~gemgym.episodes.Action` that counts no request. This is how
  :func:`gemgym.rollout`, ``gemgym run`` and ``gemgym eval`` (:class:`gemgym.evaluation.Runner`)
  play them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gemgym.agents.base import BaseAgent, call_slots

if TYPE_CHECKING:
    from gemgym.episodes.policy import Action, ActRequest
    from gemgym.vector import VectorEnv

__all__ = ["OracleAgent", "RandomAgent"]


class _EnvAgent(BaseAgent):
    """Plays what the env's :attr:`capability` method returns."""

    name: ClassVar[str]
    """The agent's name (``--agent`` of ``gemgym run`` and ``gemgym eval``)."""
    capability: ClassVar[str]
    """The env method it plays (one of :data:`gemgym.episodes.policy.ENV_CAPABILITIES`)."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        return call_slots(venv, self.capability, slots)

    def act_batch(self, requests: Sequence[ActRequest]) -> list[Action]:
        """The engine's form: each request's env asked for its move (no model request)."""
        from gemgym.episodes.policy import Action

        return [Action(r.env.call(self.capability), requests=0) for r in requests]


class RandomAgent(_EnvAgent):
    """Plays ``env.sample_random_action()``: well-formed, uninformed actions (a lower
    baseline)."""

    name = "random"
    capability = "sample_random_action"


class OracleAgent(_EnvAgent):
    """Plays ``env.expert_action()``: the env's built-in expert (an upper baseline)."""

    name = "oracle"
    capability = "expert_action"
