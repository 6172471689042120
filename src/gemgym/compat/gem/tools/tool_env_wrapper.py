"""``gem.tools.tool_env_wrapper``: GEM's ``ToolEnvWrapper``, with GEM's counting.

A tool call does not step the env, so it does not count toward the env's ``max_turns`` (GEM's
rule; gemgym's own :class:`~gemgym.wrappers.ToolEnvWrapper` counts every turn). At most
``max_tool_uses`` calls per episode are run; after that every action goes to the env. Rewards:
``tool_reward`` per call, ``+ tool_success_reward`` when it ran without error, or
``tool_execute_error_reward`` (negative) instead when it failed. ``info`` holds
``tool_use_counter``, ``tool_success_counter``, ``use_tool``, and for a call ``parsed_action`` and
``tool_type``.

Difference from GEM (a fixed bug): when one tool parsed the action but failed and a later tool
did not parse it, GEM forgot the call and sent the action to the env; here the failed call is
the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gemgym.compat.gem.core import EnvWrapper
from gemgym.compat.gem.tools.base_tool import BaseTool, GemgymTool

__all__ = ["ToolEnvWrapper"]

_LIMIT_NOTE = "\n\nReached the maximum number of tool use. Please output final answer directly."


class _Wrapped(GemgymTool):
    """A gemgym :class:`~gemgym.tools.Tool` given where GEM expects a ``BaseTool``."""

    def __init__(self, tool: Any) -> None:
        super().__init__()
        self._tool = tool
        self.tool_type = getattr(tool, "name", "tool")


def as_gem_tool(tool: Any) -> BaseTool:
    """``tool`` as a GEM tool (gemgym tools are adapted)."""
    if isinstance(tool, BaseTool):
        return tool
    from gemgym.tools import Tool

    if isinstance(tool, Tool):
        return _Wrapped(tool)
    raise TypeError(f"tools must be GEM BaseTools or gemgym Tools, got {type(tool).__name__}")


class ToolEnvWrapper(EnvWrapper):
    """Let the model call tools between its moves (see the module docstring)."""

    def __init__(
        self,
        env: Any,
        tools: Sequence[Any],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_execute_error_reward: float = 0.0,
        max_tool_uses: int | None = 10,
    ) -> None:
        super().__init__(env)
        if tool_execute_error_reward > 0:
            raise ValueError("tool_execute_error_reward must be negative (or 0)")
        if tool_execute_error_reward and (tool_reward or tool_success_reward):
            raise ValueError(
                "tool_execute_error_reward replaces tool_reward and tool_success_reward: "
                "give one or the others"
            )
        self.tools = [as_gem_tool(t) for t in tools]
        self.tool_reward = tool_reward
        self.tool_success_reward = tool_success_reward
        self.tool_execute_error_reward = tool_execute_error_reward
        self.max_tool_uses: float = float("inf") if max_tool_uses is None else max_tool_uses
        self.tool_use_counter = 0
        self.tool_success_counter = 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        prev_uses, prev_success = self.tool_use_counter, self.tool_success_counter
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        obs, info = self.env.reset(seed=seed, **kwargs)
        instructions = "\n".join(t.instruction_string() for t in self.tools)
        if len(self.tools) > 1:
            instructions = f"Available tools:\n{instructions}"
        info = dict(info)
        info.update(
            tool_use_counter=0,
            prev_ep_tool_use_counter=prev_uses,
            tool_success_counter=0,
            prev_ep_tool_success_counter=prev_success,
            use_tool=False,
        )
        return f"{obs}\n{instructions}", info

    def step(self, action: Any, verbose: bool = False) -> tuple[Any, float, bool, bool, Any]:
        call: tuple[BaseTool, bool, str, str] | None = None
        if self.tool_use_counter < self.max_tool_uses:
            for tool in self.tools:
                parsed, error, observation, parsed_action = tool.execute_action(action)
                if parsed and (call is None or not error):
                    call = (tool, error, observation, parsed_action)
                if parsed and not error:
                    break
        if call is None:
            obs, reward, terminated, truncated, info = self.env.step(action)
            info = dict(info)
            info["use_tool"] = False
        else:
            tool, error, obs, parsed_action = call
            self.tool_use_counter += 1
            if self.tool_use_counter == self.max_tool_uses:
                obs = f"{obs}{_LIMIT_NOTE}"
            reward = self.tool_reward
            if not error:
                self.tool_success_counter += 1
                reward += self.tool_success_reward
            elif self.tool_execute_error_reward:
                reward = self.tool_execute_error_reward
            terminated = truncated = False
            info = {"parsed_action": parsed_action, "tool_type": tool.tool_type, "use_tool": True}
            if verbose:
                print(f"Tool {tool.tool_type}: use {self.tool_use_counter}, error={error}")
        info["tool_use_counter"] = self.tool_use_counter
        info["tool_success_counter"] = self.tool_success_counter
        return obs, reward, terminated, truncated, info

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = dict(self.env.get_state())
        state["tool_use_counter"] = self.tool_use_counter
        state["tool_success_counter"] = self.tool_success_counter
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state)
        self.tool_use_counter = state.get("tool_use_counter", 0)
        self.tool_success_counter = state.get("tool_success_counter", 0)
