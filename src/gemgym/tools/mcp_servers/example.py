"""An example MCP server: a calculator, a clock and a notebook (built on the official ``mcp`` SDK).

Tools:

* ``calculate(expression)`` — arithmetic on numbers with ``+ - * / // % **``, parentheses and
  ``sqrt, sin, cos, tan, log, exp, abs, round, floor, ceil, pi, e``; evaluated on the parsed
  syntax tree, never with ``eval``.
* ``now(timezone="UTC")`` — the current date and time in an IANA time zone, ISO 8601.
* ``add_note(title, text)``, ``read_note(title)``, ``list_notes()`` — notes kept in memory for
  the life of the server process (one notebook per process).
* ``sleep(seconds)`` — wait, then answer (for trying out client timeouts).

Run it over stdio (what an MCP config's ``"command"`` entry starts)::

    python -m gemgym.tools.mcp_servers.example

or over streamable HTTP (endpoint ``http://HOST:PORT/mcp``)::

    python -m gemgym.tools.mcp_servers.example --http --host 127.0.0.1 --port 8765
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import math
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any

from gemgym.errors import missing_dependency

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as e:
    raise missing_dependency(e.name or "mcp", "mcp") from e

__all__ = ["build_server", "evaluate", "main"]

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "exp": math.exp,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_EXPONENT = 1000


def evaluate(expression: str) -> float | int:
    """Evaluate an arithmetic expression safely; raises ``ValueError`` on anything else."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from e

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
                raise ValueError(f"exponent {right} is too large (at most {_MAX_EXPONENT})")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _FUNCTIONS[node.func.id](*(ev(a) for a in node.args))
        raise ValueError(f"unsupported syntax in {expression!r}: {ast.dump(node)[:60]}")

    try:
        result = ev(tree)
    except (ArithmeticError, TypeError) as e:
        raise ValueError(f"cannot evaluate {expression!r}: {e}") from e
    if not isinstance(result, int | float):
        raise ValueError(f"{expression!r} is not a number")
    return result


def build_server() -> MCPServer:
    """A fresh server instance (its own notebook)."""
    app = MCPServer(
        "gemgym-example",
        instructions="A calculator, a clock and a notebook.",
        log_level="WARNING",
    )
    notes: dict[str, str] = {}

    @app.tool()
    def calculate(expression: str) -> float:
        """Evaluate an arithmetic expression, e.g. "(2 + 3) * sqrt(16)"."""
        try:
            return evaluate(expression)
        except ValueError as e:
            raise ToolError(str(e)) from e

    @app.tool()
    def now(timezone: str = "UTC") -> str:
        """The current date and time in an IANA time zone (e.g. "Europe/Paris"), ISO 8601."""
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ToolError(f"unknown time zone {timezone!r}") from e
        return dt.datetime.now(zone).isoformat(timespec="seconds")

    @app.tool()
    def add_note(title: str, text: str) -> str:
        """Save a note under a title (replacing a note with the same title)."""
        if not title.strip():
            raise ToolError("a note needs a non-empty title")
        notes[title] = text
        return f"saved note {title!r} ({len(notes)} notes)"

    @app.tool()
    def read_note(title: str) -> str:
        """The text of the note with this title."""
        if title not in notes:
            raise ToolError(f"no note titled {title!r}; titles: {sorted(notes)}")
        return notes[title]

    @app.tool()
    def list_notes() -> list[str]:
        """The titles of all notes, sorted."""
        return sorted(notes)

    @app.tool()
    def sleep(seconds: float) -> str:
        """Wait this many seconds (at most 60), then answer."""
        if not 0 <= seconds <= 60:
            raise ToolError("seconds must be from 0 to 60")
        time.sleep(seconds)
        return f"slept {seconds:g} s"

    return app


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server over stdio, or over streamable HTTP with ``--http``."""
    parser = argparse.ArgumentParser(description="gemgym's example MCP server")
    parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    app = build_server()
    if args.http:
        app.run("streamable-http", host=args.host, port=args.port)
    else:
        app.run()


if __name__ == "__main__":
    main()
