"""The tool interface: :class:`Tool`, :class:`ToolCall`, :class:`ToolResult`.

A tool instance belongs to one env (never a module-level singleton): it may keep per-episode
state (a persistent interpreter, a connection) that :meth:`Tool.reset` clears.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Tool", "ToolCall", "ToolResult"]


@dataclass(frozen=True)
class ToolCall:
    """A call parsed from the model's action.

    Attributes:
        tool: the name of the tool that parsed it.
        arguments: the parsed payload (code, a query, or ``{"name": ..., "arguments": {...}}``).
        raw: the exact part of the action that made the call (GEM's ``parsed_action``: the
            action trimmed to the end of the call, so text the model wrote after it is dropped).
    """

    tool: str
    arguments: Any
    raw: str


@dataclass
class ToolResult:
    """The outcome of a call.

    Attributes:
        observation: what the model sees next.
        ok: false when the call failed (an error, a timeout); the wrapper then gives the error
            reward instead of the success reward.
        info: details for logs and ``info`` (exit status, timings, ...).
    """

    observation: str
    ok: bool = True
    info: dict[str, Any] = field(default_factory=dict)


class Tool(abc.ABC):
    """A tool the model can call from its action text.

    Subclasses set :attr:`name` and implement :meth:`instructions`, :meth:`parse` and
    :meth:`execute`.
    """

    name: str = "tool"

    @abc.abstractmethod
    def instructions(self) -> str:
        """How the model calls the tool (added to the first observation)."""

    @abc.abstractmethod
    def parse(self, action: str) -> ToolCall | None:
        """The call in ``action``, or ``None`` when the action calls no tool."""

    @abc.abstractmethod
    def execute(self, call: ToolCall) -> ToolResult:
        """Run a parsed call. Failures of the call are a ``ToolResult(ok=False)``, not errors."""

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Async :meth:`execute`; the default runs it in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.execute, call)

    def reset(self) -> None:
        """A new episode starts: clear per-episode state."""

    def close(self) -> None:
        """Release resources (processes, connections). Idempotent."""
