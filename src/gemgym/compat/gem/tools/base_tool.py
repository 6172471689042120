"""``gem.tools.base_tool``: GEM's ``BaseTool``.

A GEM tool implements ``instruction_string()`` and ``execute_action(action)``, which returns
``(parsed, has_error, observation, parsed_action)``. :class:`GemgymTool` adapts a gemgym
:class:`~gemgym.tools.Tool`; the layer's ``PythonCodeTool``, ``SearchTool`` and ``MCPTool`` are
built that way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BaseTool", "GemgymTool"]


class BaseTool:
    """GEM's tool interface."""

    tool_type = "base"

    def __init__(self, num_workers: int = 1) -> None:
        self.num_workers = num_workers

    def instruction_string(self) -> str:
        """How the model calls the tool."""
        raise NotImplementedError("Subclass must implement this method")

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        """``(parsed, has_error, observation, parsed_action)`` for the model's ``action``."""
        raise NotImplementedError("Subclass must implement this method")


class GemgymTool(BaseTool):
    """A GEM tool backed by a gemgym :class:`~gemgym.tools.Tool` (:attr:`tool`)."""

    def __init__(self, num_workers: int = 1) -> None:
        super().__init__(num_workers)
        self._tool: Any = None

    def _make_tool(self) -> Any:
        raise NotImplementedError

    @property
    def tool(self) -> Any:
        """The gemgym tool (built on first use)."""
        if self._tool is None:
            self._tool = self._make_tool()
        return self._tool

    @property
    def name(self) -> str:
        return str(self.tool_type)

    def instruction_string(self) -> str:
        return str(self.tool.instructions())

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        if not isinstance(action, str):  # GEM's tools took any object; nothing to parse
            return False, True, "", str(action)
        call = self.tool.parse(action)
        if call is None:
            return False, True, "", ""
        result = self.tool.execute(call)
        return True, not result.ok, result.observation, call.raw

    def close(self) -> None:
        if self._tool is not None:
            self._tool.close()
