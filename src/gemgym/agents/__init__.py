"""Agents: anything that turns a batch of observations into a batch of actions.

* :class:`RandomAgent` plays each env's ``sample_random_action()``.
* :class:`OracleAgent` plays each env's ``expert_action()`` (binary search, solvers, ...).
* :class:`OpenAIAgent` asks any OpenAI-compatible chat-completions server (vLLM, SGLang, an API).
* :class:`FunctionAgent` adapts a plain batched callable ``list[obs] -> list[action]``.
"""

from gemgym.agents.base import Agent, BaseAgent, FunctionAgent, make_agent
from gemgym.agents.builtin import OracleAgent, RandomAgent

__all__ = [
    "Agent",
    "BaseAgent",
    "FunctionAgent",
    "OpenAIAgent",
    "OracleAgent",
    "RandomAgent",
    "make_agent",
]


def __getattr__(name: str) -> object:
    if name == "OpenAIAgent":
        from gemgym.agents.openai import OpenAIAgent

        return OpenAIAgent
    raise AttributeError(f"module 'gemgym.agents' has no attribute {name!r}")
