"""Tools that turn single-turn tasks into multi-turn tool use.

A :class:`~gemgym.tools.base.Tool` parses a call out of the model's action, executes it and
returns an observation; :class:`gemgym.wrappers.tools.ToolEnvWrapper` puts tools around any env.
Concrete tools live in their own modules (``python``, ``search``, ``mcp``), imported on use.
"""

from gemgym.tools.base import Tool, ToolCall, ToolResult

__all__ = ["Tool", "ToolCall", "ToolResult"]
