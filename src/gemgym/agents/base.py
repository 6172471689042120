"""The :class:`Agent` protocol and small adapters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from gemgym.core import Env
from gemgym.errors import ConfigError

__all__ = ["Agent", "BaseAgent", "FunctionAgent"]


@runtime_checkable
class Agent(Protocol):
    """Maps a batch of observations to a batch of actions.

    ``slots`` identify the episode streams: slot ``k`` always refers to the same env, and
    :meth:`start_episodes` tells the agent which slots begin a new episode (so stateful agents,
    like a chat agent that keeps the conversation, can forget the old one).
    """

    def start_episodes(self, slots: Sequence[int]) -> None:
        """New episodes start in ``slots``."""
        ...

    def act(
        self,
        observations: Sequence[Any],
        *,
        envs: Sequence[Env[Any, Any]],
        slots: Sequence[int],
    ) -> list[Any]:
        """One action per observation (``envs[i]`` produced ``observations[i]``)."""
        ...


class BaseAgent:
    """Convenience base: stateless agents only implement :meth:`act`."""

    def start_episodes(self, slots: Sequence[int]) -> None:
        """Stateless agents ignore episode starts."""

    def act(
        self,
        observations: Sequence[Any],
        *,
        envs: Sequence[Env[Any, Any]],
        slots: Sequence[int],
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
        envs: Sequence[Env[Any, Any]],
        slots: Sequence[int],
    ) -> list[Any]:
        actions = list(self.fn(list(observations)))
        if len(actions) != len(observations):
            raise ConfigError(
                f"policy returned {len(actions)} actions for {len(observations)} observations"
            )
        return actions
