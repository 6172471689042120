"""The :class:`Agent` protocol, :func:`call_slots` and small adapters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gemgym.errors import ConfigError

if TYPE_CHECKING:
    from gemgym.vector import VectorEnv

__all__ = ["Agent", "BaseAgent", "FunctionAgent", "call_slots"]


@runtime_checkable
class Agent(Protocol):
    """Maps a batch of observations to a batch of actions.

    ``slots`` identify the episode streams: slot ``k`` is env ``k`` of the vector env that plays
    the episodes, and :meth:`start_episodes` tells the agent which slots begin a new episode (so
    stateful agents, like a chat agent that keeps the conversation, can forget the old one).

    The observations are what a model is shown (:func:`gemgym.prompting.model_view`: each
    observation with the board or state its env keeps in ``info["suffix"]``), so an LLM agent
    sends them as they are and never plays blind.

    An agent gets observations and slot ids, never env objects, so it runs on every vector
    backend (the envs may live in worker processes or Ray actors). An agent that asks the env
    itself (an expert, a random-action sampler) reads it through ``venv``, e.g.
    ``call_slots(venv, "expert_action", slots)``; it never steps or resets ``venv``.
    """

    def start_episodes(self, slots: Sequence[int]) -> None:
        """New episodes start in ``slots``."""
        ...

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        """One action per observation (env ``slots[i]`` of ``venv`` produced ``observations[i]``)."""
        ...


class BaseAgent:
    """Convenience base: stateless agents only implement :meth:`act`."""

    def start_episodes(self, slots: Sequence[int]) -> None:
        """Stateless agents ignore episode starts."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        """One action per observation."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (HTTP clients, thread pools)."""


class FunctionAgent(BaseAgent):
    """Wrap a batched policy ``fn(observations) -> actions`` as an agent."""

    def __init__(self, fn: Callable[[list[Any]], Sequence[Any]]) -> None:
        self.fn = fn

    def act(
        self,
        observations: Sequence[Any],
        *,
        slots: Sequence[int],
        venv: VectorEnv,
    ) -> list[Any]:
        actions = list(self.fn(list(observations)))
        if len(actions) != len(observations):
            raise ConfigError(
                f"policy returned {len(actions)} actions for {len(observations)} observations"
            )
        return actions


def call_slots(venv: VectorEnv, name: str, slots: Sequence[int], *args: Any) -> list[Any]:
    """Call method ``name`` of the envs of ``slots`` (in that order) through ``venv``.

    This is ``venv.call(name, *args, indices=slots)``: on every backend only those envs are
    called (the ``process`` and ``ray`` backends ask only the workers that hold them).
    """
    return venv.call(name, *args, indices=list(slots))
