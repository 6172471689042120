"""Agents: anything that turns a batch of observations into a batch of actions.

* :class:`RandomAgent` plays each env's ``sample_random_action()``.
* :class:`OracleAgent` plays each env's ``expert_action()`` (binary search, solvers, ...).
* :class:`OpenAIAgent` asks any OpenAI-compatible chat-completions server (vLLM, SGLang, an API).
* :class:`FunctionAgent` adapts a plain batched callable ``list[obs] -> list[action]``.

An agent's ``act(observations, slots=, venv=)`` gets the observations and the slot ids of the
episodes in progress, never env objects; an agent that asks the envs reads through the vector env
with :func:`call_slots`, so every agent runs on every vector backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gemgym.agents.base import Agent, BaseAgent, FunctionAgent, call_slots
from gemgym.agents.builtin import OracleAgent, RandomAgent
from gemgym.errors import ConfigError

if TYPE_CHECKING:
    from gemgym.agents.openai import OpenAIAgent

__all__ = [
    "Agent",
    "BaseAgent",
    "FunctionAgent",
    "OpenAIAgent",
    "OracleAgent",
    "RandomAgent",
    "call_slots",
    "make_agent",
]


def make_agent(name: str, **kwargs: Any) -> Agent:
    """Build a built-in agent by name: ``random``, ``oracle`` or ``openai``.

    It lives here, above the agent modules, so that :mod:`gemgym.agents.base` imports none of
    the agents built on it.
    """
    if name == "random":
        return RandomAgent(**kwargs)
    if name == "oracle":
        return OracleAgent(**kwargs)
    if name == "openai":
        from gemgym.agents.openai import OpenAIAgent

        return OpenAIAgent(**kwargs)
    raise ConfigError(f"unknown agent {name!r}; choose random, oracle or openai")


def __getattr__(name: str) -> object:
    if name == "OpenAIAgent":
        from gemgym.agents.openai import OpenAIAgent

        return OpenAIAgent
    raise AttributeError(f"module 'gemgym.agents' has no attribute {name!r}")
