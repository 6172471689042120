"""The tool interface: :class:`Tool`, :class:`ToolCall`, :class:`ToolResult`.

A tool instance belongs to one env (never a module-level singleton): it may keep per-episode
state (a persistent interpreter, a connection) that :meth:`Tool.reset` clears.

Tool output goes into the model's context, so tools cut it to ``max_output_chars`` with
:func:`truncate_output` (the start and the end are kept, and a marker in between says how many
characters were cut).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from gemgym.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "Tool",
    "ToolCall",
    "ToolResult",
    "check_max_output_chars",
    "truncate_output",
]

DEFAULT_MAX_OUTPUT_CHARS = 8_000
"""Default cut of a tool's output, in characters (about 2,000 tokens: a fraction of a context
window, however long the program's print or the retrieved document)."""


def check_max_output_chars(value: object) -> int | None:
    """``value`` as a ``max_output_chars`` setting: a positive int, or ``None`` for no cut."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"max_output_chars must be a positive int (characters) or None for no cut, "
            f"got {value!r}"
        )
    return value


def _marker(cut: int) -> str:
    return f"\n[... {cut:,} characters cut ...]\n"


def truncate_output(text: str, max_chars: int | None) -> str:
    """``text`` cut to at most ``max_chars`` characters (``None``: unchanged).

    The first and last halves of the allowance are kept (a program's first lines and its final
    error both survive) around a line ``[... N characters cut ...]``. When ``max_chars`` is
    smaller than that line, only the line remains.
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    keep = max(0, max_chars - len(_marker(len(text))))
    head = keep - keep // 2
    tail = keep // 2
    return text[:head] + _marker(len(text) - keep) + (text[len(text) - tail :] if tail else "")


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
    :meth:`execute`; tools that wait on I/O also implement :meth:`aexecute`, which
    :meth:`gemgym.wrappers.ToolEnvWrapper.astep` uses.
    """

    name: str = "tool"
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS
    """Observations are cut to this many characters (see :func:`truncate_output`)."""
    blocking_io: bool = False
    """Whether :meth:`execute` waits on I/O or works hard (a sandbox, a search index, a
    server); a :class:`~gemgym.wrappers.ToolEnvWrapper` with such a tool declares
    :attr:`gemgym.Env.blocking_io`, so the episode engine steps it on its own threads."""

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

    def warmup(self) -> None:
        """Start now what the first call would start (a sandbox); idempotent."""

    def close(self) -> None:
        """Release resources (processes, connections). Idempotent."""
