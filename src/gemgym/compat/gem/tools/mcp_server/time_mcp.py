"""``gem.tools.mcp_server.time_mcp``: GEM's sample time MCP server, on the official ``mcp`` SDK.

Tools (GEM's names and outputs): ``current_time(format, timezone)`` (Moment.js-like formats such
as ``YYYY-MM-DD HH:mm:ss`` or ``h:mm A``), ``relative_time(time)`` (``"in 3 minutes"``, ``"2 hours
ago"``), ``days_in_month(date)``, ``get_timestamp(time)`` (Unix milliseconds),
``convert_time(sourceTimezone, targetTimezone, time)`` and ``get_week_year(date)``
(``"week: W, isoWeek: I"``). Times are ``YYYY-MM-DD HH:mm:ss[.SSS]`` in local time, dates
``YYYY-MM-DD``; an unknown time zone falls back to local time, as in GEM.

``app.get_tool(name)`` and ``await tool.run({...})`` work as with GEM's fastmcp app (GEM's tests
call them); ``python -m gemgym.compat.gem -m gem.tools.mcp_server.time_mcp --port 8081`` serves
it over streamable HTTP at ``/time-mcp`` (``--transport stdio`` for stdio).
"""

from __future__ import annotations

import argparse
import calendar
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

__all__ = [
    "app",
    "convert_time",
    "current_time",
    "days_in_month",
    "get_timestamp",
    "get_week_year",
    "main",
    "relative_time",
]

_TOKENS = {
    "YYYY": "%Y",
    "YY": "%y",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
    "MM": "%m",
    "DD": "%d",
    "A": "%p",
    "h": "%-I",
}
_TOKEN_RE = re.compile("|".join(sorted(_TOKENS, key=len, reverse=True)))


def _moment_to_strftime(fmt: str) -> str:
    """A Moment.js-like format (``YYYY-MM-DD HH:mm:ss``, ``h:mm A``, ...) as a strftime format."""
    return _TOKEN_RE.sub(lambda m: _TOKENS[m.group(0)], fmt)


def _local_tz() -> tzinfo:
    tz = datetime.now().astimezone().tzinfo
    return tz if tz is not None else UTC


def _zone(name: str | None) -> tzinfo:
    if not name:
        return _local_tz()
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except Exception:  # GEM's server: an unknown zone means local time
        return _local_tz()


def _naive(time_str: str) -> datetime:
    if "." in time_str:
        whole, frac = time_str.split(".", 1)
        return datetime.strptime(f"{whole}.{frac[:6].ljust(6, '0')}", "%Y-%m-%d %H:%M:%S.%f")
    return datetime.strptime(time_str, "%Y-%m-%d %H:%M:%S")


def _parse_dt(time_str: str) -> datetime:
    """``YYYY-MM-DD HH:mm:ss[.SSS]`` in local time."""
    return _naive(time_str).replace(tzinfo=_local_tz())


def _parse_date(date_str: str) -> datetime:
    """``YYYY-MM-DD`` at midnight, local time."""
    return datetime.strptime(date_str, "%Y-%m-%d").replace(tzinfo=_local_tz())


def current_time(format: str = "YYYY-MM-DD HH:mm:ss", timezone: str | None = None) -> str:
    """The current date and time in a Moment.js-like format and an optional IANA time zone."""
    now = datetime.now(tz=_zone(timezone))
    try:
        return now.strftime(_moment_to_strftime(format))
    except ValueError:
        return now.strftime("%Y-%m-%d %H:%M:%S")


_UNITS = (("seconds", 60), ("minutes", 60), ("hours", 24), ("days", 30), ("months", 12))


def relative_time(time: str) -> str:
    """How far ``time`` (``YYYY-MM-DD HH:mm:ss``) is from now: ``in 5 minutes``, ``2 days ago``."""
    seconds = int((_parse_dt(time) - datetime.now(tz=_local_tz())).total_seconds())
    future, value = seconds > 0, abs(seconds)
    unit = "years"
    for name, size in _UNITS:
        if value < size:
            unit = name
            break
        value //= size
    return f"in {value} {unit}" if future else f"{value} {unit} ago"


def days_in_month(date: str | None = None) -> str:
    """The number of days in the month of ``date`` (``YYYY-MM-DD``; default: this month)."""
    day = _parse_date(date) if date else datetime.now(tz=_local_tz())
    return str(calendar.monthrange(day.year, day.month)[1])


def get_timestamp(time: str) -> str:
    """Unix time in milliseconds of ``time`` (``YYYY-MM-DD HH:mm:ss[.SSS]``, local time)."""
    moment = _parse_dt(time)
    whole = int(moment.astimezone(UTC).replace(microsecond=0).timestamp())
    return str(whole * 1000 + moment.microsecond // 1000)


def convert_time(sourceTimezone: str, targetTimezone: str, time: str) -> str:
    """``time`` (``YYYY-MM-DD HH:mm:ss``) read in one IANA time zone, shown in another."""
    moment = _naive(time).replace(tzinfo=_zone(sourceTimezone))
    return moment.astimezone(_zone(targetTimezone)).strftime("%Y-%m-%d %H:%M:%S")


def get_week_year(date: str | None = None) -> str:
    """``week: W, isoWeek: I``: the Monday-first week of the year and the ISO week of ``date``."""
    day = _parse_date(date) if date else datetime.now(tz=_local_tz())
    return f"week: {int(day.strftime('%W'))}, isoWeek: {day.isocalendar().week}"


_TOOLS: dict[str, Callable[..., str]] = {
    f.__name__: f for f in (current_time, relative_time, days_in_month, get_timestamp, convert_time)
}
_TOOLS["get_week_year"] = get_week_year


class _Tool:
    """One tool of :data:`app`; ``await run(arguments)`` calls it as the server would."""

    def __init__(self, server: Any, name: str) -> None:
        self._server = server
        self.name = name

    async def run(self, arguments: dict[str, Any]) -> Any:
        try:
            result = await self._server.call_tool(self.name, dict(arguments))
        except Exception as e:  # the SDK's own error types: one ValueError for callers
            raise ValueError(f"{self.name}: {e}") from e
        if getattr(result, "is_error", False):
            raise ValueError(result.content[0].text if result.content else "tool error")
        return result


class _App:
    """The time server: an ``mcp`` SDK server plus fastmcp's ``get_tool`` (what GEM tests use)."""

    def __init__(self) -> None:
        self._server: Any = None

    @property
    def server(self) -> Any:
        """The ``mcp.server.mcpserver.MCPServer`` (built on first use)."""
        if self._server is None:
            from mcp.server.mcpserver import MCPServer

            server = MCPServer("mcp-time-server", log_level="WARNING")
            for fn in _TOOLS.values():
                server.tool()(fn)
            self._server = server
        return self._server

    async def get_tool(self, name: str) -> _Tool:
        if name not in _TOOLS:
            raise KeyError(f"no tool {name!r}; tools: {sorted(_TOOLS)}")
        return _Tool(self.server, name)

    def run(
        self,
        transport: str = "streamable-http",
        host: str = "127.0.0.1",
        port: int = 8081,
        path: str = "/time-mcp",
    ) -> None:
        if transport == "stdio":
            self.server.run()
        else:
            self.server.run("streamable-http", host=host, port=port, streamable_http_path=path)


app = _App()
"""GEM's ``app``."""


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the tools (GEM's command-line options)."""
    parser = argparse.ArgumentParser(description="GEM's sample time MCP server")
    parser.add_argument(
        "--transport", choices=["stdio", "http", "streamable-http"], default="streamable-http"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--path", default="/time-mcp")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    transport = "stdio" if args.transport == "stdio" else "streamable-http"
    app.run(transport, host=args.host, port=args.port, path=args.path)


if __name__ == "__main__":
    main()
