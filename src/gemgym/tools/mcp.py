"""``MCPTool``: call the tools of MCP servers (stdio or streamable HTTP) from the model's action.

Built on the official ``mcp`` SDK 2.x (extra ``mcp``). One tool instance connects to one or more
servers, lists their tools, puts their JSON schemas in its instructions, and turns the model's
tool calls into ``tools/call`` requests.

Servers come from a standard MCP config (the ``mcpServers`` object of Claude Desktop, Cursor,
GEM and fastmcp configs)::

    {"mcpServers": {
        "calc":  {"command": "python", "args": ["-m", "gemgym.tools.mcp_servers.example"],
                  "env": {"KEY": "value"}, "cwd": "/tmp"},
        "web":   {"url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer t"}}
    }}

``command`` entries are started as subprocesses speaking stdio; ``url`` entries use streamable
HTTP. With one server the model calls tools by their own names; with several, by
``<server>_<tool>`` (GEM's and fastmcp's convention), and a bare name is accepted when exactly
one server has that tool.

The model calls a tool in either format (the first ``<tool_call>`` of the action is used)::

    <tool_call><tool_name>calculate</tool_name><arguments>{"expression": "2+2"}</arguments></tool_call>
    <tool_call>{"name": "calculate", "arguments": {"expression": "2+2"}}</tool_call>

The first is GEM's, the second the JSON function-call format of Qwen and Hermes chat templates
(``"parameters"`` is accepted for ``"arguments"``, and arguments given as a JSON string are
decoded). The observation is ``\\n<tool_response>\\n...\\n</tool_response>\\n`` as in GEM; a failed
call (malformed call, unknown tool, the tool's own error, a timeout, a lost server) reads
``[Tool execution error: ...]`` inside it and has ``ok=False``. Nothing the model writes raises.

Connections stay open for the life of the tool (GEM reconnected on every call): a private event
loop runs in a background thread and owns the MCP sessions, so :meth:`MCPTool.execute` works from
plain code, from worker threads and from inside a running event loop, and
:meth:`MCPTool.aexecute` awaits without blocking the caller's loop. Each call has a ``timeout``;
a call that fails because the connection broke is retried up to ``retries`` times on a fresh
connection (a timeout is not retried: the tool may have acted). ``close()`` stops the servers.

Servers keep their own state across episodes (:meth:`~gemgym.tools.base.Tool.reset` does not
restart them). A deep copy (``env.spawn()``) connects a new instance to the same servers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import weakref
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack

from gemgym.errors import ClosedError, ConfigError, ToolError, missing_dependency
from gemgym.tools._mcp_connection import (
    Connection,
    LoopThread,
    MCPServerConfig,
    MCPToolInfo,
    describe_error,
    is_connection_error,
    read_config,
    result_text,
    shutdown_all,
)
from gemgym.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    Tool,
    ToolCall,
    ToolResult,
    check_max_output_chars,
    truncate_output,
)

__all__ = ["MCPServerConfig", "MCPTool", "MCPToolInfo", "parse_tool_call"]

_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_GEM_RE = re.compile(
    r"^\s*<tool_name>(.*?)</tool_name>\s*<arguments>(.*?)</arguments>\s*$", re.DOTALL
)

# -- parsing --------------------------------------------------------------------------------------


def parse_tool_call(action: str) -> tuple[str | None, Any, str | None, str] | None:
    """The first ``<tool_call>`` of ``action``: ``(name, arguments, error, raw)``, or ``None``.

    ``error`` says why a call that is there cannot be used (bad JSON, no name); ``raw`` is the
    action up to the end of the call.
    """
    m = _CALL_RE.search(action)
    if m is None:
        return None
    body, raw = m.group(1), action[: m.end()]
    gem = _GEM_RE.match(body)
    if gem is not None:
        name: Any = gem.group(1).strip()
        arguments: Any = gem.group(2).strip() or "{}"
    else:
        try:
            decoded = json.loads(body)
        except json.JSONDecodeError as e:
            return None, None, f"the tool call is not valid JSON ({e.msg})", raw
        if not isinstance(decoded, dict) or "name" not in decoded:
            return None, None, 'a JSON tool call needs "name" and "arguments"', raw
        name = decoded["name"]
        arguments = decoded.get("arguments", decoded.get("parameters", {}))
    if not isinstance(name, str) or not name:
        return None, None, "the tool name must be a non-empty string", raw
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            return name, None, f"the arguments are not valid JSON ({e.msg})", raw
    if not isinstance(arguments, dict):
        return name, None, "the arguments must be a JSON object", raw
    return name, arguments, None, raw


# -- the tool -----------------------------------------------------------------------------------


class _Options(TypedDict, total=False):
    timeout: float
    connect_timeout: float
    retries: int
    retry_delay: float
    max_output_chars: int | None


def _response(text: str) -> str:
    return f"\n<tool_response>\n{text}\n</tool_response>\n"


class MCPTool(Tool):
    """The tools of one or more MCP servers (see the module docstring).

    Args:
        config: an MCP config ``{"mcpServers": {name: entry}}``, the ``mcpServers`` mapping
            itself, or the URL of one streamable-HTTP server (as GEM's ``MCPTool(url)``).
        timeout: seconds allowed for one tool call.
        connect_timeout: seconds allowed to start a server, connect and list its tools.
        retries: extra attempts, on a fresh connection, for a call whose connection broke.
        retry_delay: seconds between attempts.
        max_output_chars: cut a result's text to this many characters (inside the
            ``<tool_response>`` block, with a ``[... N characters cut ...]`` line; ``None``: no
            cut).

    Raises:
        ToolError: a server cannot be started or reached, or two tools get the same name.
        DependencyNotInstalled: the ``mcp`` package is missing.
    """

    name = "mcp"
    blocking_io = False
    """:meth:`aexecute` awaits the server without holding the caller's loop (the sessions live
    on the tool's own loop thread), so a :class:`~gemgym.wrappers.ToolEnvWrapper` stepped
    through ``astep`` needs no thread for it."""

    def __init__(
        self,
        config: Mapping[str, Any] | str,
        *,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        retries: int = 2,
        retry_delay: float = 0.5,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        try:
            import mcp  # noqa: F401
        except ImportError as e:
            raise missing_dependency("mcp", "mcp") from e
        for key, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{key} must be a positive number, got {value!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"retries must be a non-negative int, got {retries!r}")
        if retry_delay < 0:
            raise ConfigError(f"retry_delay must be non-negative, got {retry_delay!r}")
        self.servers = read_config(config)
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.retries = retries
        self.retry_delay = float(retry_delay)
        self.max_output_chars = check_max_output_chars(max_output_chars)
        self._closed = False
        self._loop = LoopThread()
        self._connections = {s.name: Connection(s) for s in self.servers}
        self._finalizer = weakref.finalize(
            self, shutdown_all, self._loop, list(self._connections.values())
        )
        try:
            self._loop.run(self._connect_all())
            self.tools = self._name_tools()
        except BaseException:
            self._finalizer()
            raise

    # -- construction helpers ---------------------------------------------------------------
    @classmethod
    def from_config_file(cls, path: str | Path, **options: Unpack[_Options]) -> MCPTool:
        """Read a JSON MCP config file (``{"mcpServers": {...}}``)."""
        try:
            config = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"cannot read MCP config {path}: {e}") from e
        except json.JSONDecodeError as e:
            raise ConfigError(f"MCP config {path} is not valid JSON: {e}") from e
        if not isinstance(config, dict):
            raise ConfigError(f"MCP config {path} must hold a JSON object")
        return cls(config, **options)

    @classmethod
    def from_command(
        cls,
        command: str,
        args: list[str] | tuple[str, ...] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str = "default",
        **options: Unpack[_Options],
    ) -> MCPTool:
        """One server started as a subprocess speaking stdio."""
        entry: dict[str, Any] = {"command": command, "args": list(args)}
        if env is not None:
            entry["env"] = dict(env)
        if cwd is not None:
            entry["cwd"] = cwd
        return cls({"mcpServers": {name: entry}}, **options)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str = "default",
        **options: Unpack[_Options],
    ) -> MCPTool:
        """One server reached over streamable HTTP (e.g. ``http://127.0.0.1:8765/mcp``)."""
        entry: dict[str, Any] = {"url": url}
        if headers:
            entry["headers"] = dict(headers)
        return cls({"mcpServers": {name: entry}}, **options)

    # -- connections ----------------------------------------------------------------------------
    async def _connect(self, conn: Connection) -> None:
        try:
            await conn.open(self.connect_timeout)
        except Exception as e:
            c = conn.config
            where = f"command {c.command!r} {list(c.args)}" if c.command else f"url {c.url}"
            tail = conn.stderr_tail()
            raise ToolError(
                f"cannot connect to MCP server {c.name!r} ({where}): {describe_error(e)}"
                + (f"\nserver stderr:\n{tail}" if tail else "")
                + "\nCheck that the server starts on its own with this command or URL."
            ) from e

    async def _connect_all(self) -> None:
        results = await asyncio.gather(
            *(self._connect(c) for c in self._connections.values()), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r

    def _name_tools(self) -> dict[str, MCPToolInfo]:
        multi = len(self._connections) > 1
        tools: dict[str, MCPToolInfo] = {}
        for server, conn in self._connections.items():
            for t in conn.tools:
                name = f"{server}_{t.name}" if multi else t.name
                if name in tools:
                    raise ToolError(
                        f"two MCP tools are both called {name!r}; rename a server in the config"
                    )
                tools[name] = MCPToolInfo(
                    name, server, t.name, t.description or "", dict(t.input_schema or {})
                )
        return tools

    def _resolve(self, name: str) -> MCPToolInfo | None:
        if name in self.tools:
            return self.tools[name]
        bare = [t for t in self.tools.values() if t.tool == name]
        return bare[0] if len(bare) == 1 else None

    # -- Tool interface ---------------------------------------------------------------------
    def instructions(self) -> str:
        """How to call the tools, with each tool's JSON schema (OpenAI function format)."""
        functions = "\n".join(
            json.dumps(t.to_function(), ensure_ascii=False)
            for t in sorted(self.tools.values(), key=lambda t: t.name)
        )
        return (
            "# Tools\n\n"
            "You can call the tools listed below, one call per message; the result comes back "
            "inside <tool_response></tool_response> in the next message.\n\n"
            "Call a tool like this, with arguments that follow the tool's JSON schema:\n"
            "<tool_call>\n<tool_name>TOOL_NAME</tool_name>\n"
            '<arguments>{"param1": "value1", "param2": 2}</arguments>\n</tool_call>\n\n'
            "or, equivalently:\n"
            '<tool_call>{"name": "TOOL_NAME", "arguments": {"param1": "value1"}}</tool_call>\n\n'
            "Available tools, inside <tools></tools>:\n"
            f"<tools>\n{functions}\n</tools>"
        )

    def parse(self, action: str) -> ToolCall | None:
        """The first ``<tool_call>``: ``arguments`` is ``{"name", "arguments", "error"}``."""
        parsed = parse_tool_call(action)
        if parsed is None:
            return None
        name, arguments, error, raw = parsed
        return ToolCall(self.name, {"name": name, "arguments": arguments, "error": error}, raw)

    def execute(self, call: ToolCall) -> ToolResult:
        """Call the tool; failures are ``[Tool execution error: ...]`` observations."""
        if self._closed:
            raise ClosedError("this MCPTool is closed; create a new one")
        early = self._check(call)
        if early is not None:
            return early
        # the loop enforces the call timeout; the margin covers reconnection attempts
        limit = (self.timeout + self.connect_timeout + self.retry_delay) * (self.retries + 1) + 5
        future = self._loop.submit(self._acall(call))
        try:
            return future.result(limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            error = f"no result within {limit:g} s (server unresponsive)"
            return ToolResult(
                _response(f"[Tool execution error: {error}]"),
                ok=False,
                info={"error": error, "timeout": True},
            )

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Await the call without blocking the caller's event loop."""
        if self._closed:
            raise ClosedError("this MCPTool is closed; create a new one")
        early = self._check(call)
        if early is not None:
            return early
        future: Awaitable[ToolResult] = asyncio.wrap_future(self._loop.submit(self._acall(call)))
        return await future

    def _check(self, call: ToolCall) -> ToolResult | None:
        spec = call.arguments if isinstance(call.arguments, dict) else {}
        name, error = spec.get("name"), spec.get("error")
        if error is None and (not isinstance(name, str) or self._resolve(name) is None):
            error = f"no tool named {name!r}; available tools: {', '.join(sorted(self.tools))}"
        if error is not None:
            return ToolResult(
                _response(f"[Tool execution error: {error}]"),
                ok=False,
                info={"tool_name": name, "error": error},
            )
        return None

    async def _acall(self, call: ToolCall) -> ToolResult:
        spec = call.arguments
        info = self._resolve(spec["name"])
        assert info is not None  # checked by _check
        conn = self._connections[info.server]
        base = {"tool_name": info.name, "server": info.server}
        error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.retry_delay)
            try:
                if not conn.alive:
                    await conn.aclose()
                    await self._connect(conn)
                result = await asyncio.wait_for(
                    conn.client.call_tool(info.tool, spec["arguments"]), self.timeout
                )
            except TimeoutError:
                error = f"the call timed out after {self.timeout:g} s"
                return ToolResult(
                    _response(f"[Tool execution error: {error}]"),
                    ok=False,
                    info={**base, "error": error, "timeout": True, "attempts": attempt + 1},
                )
            except Exception as e:
                error = str(e) if isinstance(e, ToolError) else describe_error(e)
                if isinstance(e, ToolError) or is_connection_error(e):
                    await conn.aclose()
                    continue  # reconnect and retry
                break
            text = truncate_output(result_text(result), self.max_output_chars)
            if result.is_error:
                return ToolResult(
                    _response(f"[Tool execution error: {text}]"),
                    ok=False,
                    info={**base, "error": text, "attempts": attempt + 1},
                )
            return ToolResult(
                _response(text),
                info={**base, "attempts": attempt + 1, "structured": result.structured_content},
            )
        return ToolResult(
            _response(f"[Tool execution error: {error}]"),
            ok=False,
            info={**base, "error": error, "attempts": self.retries + 1},
        )

    def close(self) -> None:
        """Stop the servers' sessions (stdio servers exit) and the background loop."""
        self._closed = True
        self._finalizer()

    def __deepcopy__(self, memo: dict[int, Any]) -> MCPTool:
        """A new tool connected to the same servers (sessions cannot be copied)."""
        config = {
            "mcpServers": {
                s.name: (
                    {"command": s.command, "args": list(s.args), "env": s.env, "cwd": s.cwd}
                    if s.command is not None
                    else {"url": s.url, "headers": dict(s.headers)}
                )
                for s in self.servers
            }
        }
        return type(self)(
            config,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
            retries=self.retries,
            retry_delay=self.retry_delay,
            max_output_chars=self.max_output_chars,
        )

    def __repr__(self) -> str:
        return f"<MCPTool servers={[s.name for s in self.servers]} tools={sorted(self.tools)}>"
