"""The connection side of :class:`~gemgym.tools.mcp.MCPTool`: server configs, sessions and the
private event loop that owns them.

- :class:`MCPServerConfig` and :func:`read_config`: one server of a standard ``mcpServers``
  config (stdio ``command`` or streamable-HTTP ``url``);
- :class:`MCPToolInfo`: a tool a server offers;
- ``Connection``: one open session to one server (connect, list tools, call, reconnect);
- ``LoopThread``: the background event loop the sessions live in, so calls work from plain code,
  worker threads and running event loops alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar, cast

from gemgym.errors import ConfigError

__all__ = [
    "Connection",
    "LoopThread",
    "MCPServerConfig",
    "MCPToolInfo",
    "describe_error",
    "is_connection_error",
    "read_config",
    "result_text",
    "shutdown_all",
]

T = TypeVar("T")

_SERVER_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "transport", "type"})


# -- configuration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MCPServerConfig:
    """How to reach one MCP server: a ``command`` (stdio) or a ``url`` (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    @classmethod
    def from_dict(cls, name: str, entry: Mapping[str, Any]) -> MCPServerConfig:
        """Read one ``mcpServers`` entry; raises :class:`~gemgym.errors.ConfigError`."""
        if not isinstance(entry, Mapping):
            raise ConfigError(f"MCP server {name!r}: expected an object, got {entry!r}")
        unknown = sorted(set(entry) - _SERVER_KEYS)
        if unknown:
            raise ConfigError(
                f"MCP server {name!r}: unknown keys {unknown}; use command/args/env/cwd "
                "(stdio) or url/headers (streamable HTTP)"
            )
        kind = entry.get("transport", entry.get("type"))
        if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamable_http"):
            raise ConfigError(
                f"MCP server {name!r}: transport {kind!r} is not supported; "
                "use stdio (command) or streamable HTTP (url)"
            )
        command, url = entry.get("command"), entry.get("url")
        if (command is None) == (url is None):
            raise ConfigError(f"MCP server {name!r} needs exactly one of 'command' and 'url'")
        args = entry.get("args", [])
        if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"MCP server {name!r}: 'args' must be a list of strings")
        for key in ("env", "headers"):
            value = entry.get(key)
            if value is not None and not (
                isinstance(value, Mapping)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
            ):
                raise ConfigError(f"MCP server {name!r}: {key!r} must map strings to strings")
        if url is not None and not str(url).startswith(("http://", "https://")):
            raise ConfigError(f"MCP server {name!r}: url must start with http:// or https://")
        return cls(
            name=name,
            command=None if command is None else str(command),
            args=tuple(args),
            env=entry.get("env"),
            cwd=None if entry.get("cwd") is None else str(entry["cwd"]),
            url=None if url is None else str(url),
            headers=dict(entry.get("headers") or {}),
        )


def read_config(config: Mapping[str, Any] | str) -> list[MCPServerConfig]:
    if isinstance(config, str):
        if not config.startswith(("http://", "https://")):
            raise ConfigError(
                f"MCPTool takes a config mapping or a server URL, got {config!r}; "
                "for a config file use MCPTool.from_config_file(path)"
            )
        config = {"mcpServers": {"default": {"url": config}}}
    servers = config.get("mcpServers", config) if isinstance(config, Mapping) else None
    if not isinstance(servers, Mapping) or not servers:
        raise ConfigError(
            'an MCP config is {"mcpServers": {name: {"command": ..., "args": [...]} or '
            '{"url": ...}}} with at least one server'
        )
    return [MCPServerConfig.from_dict(str(name), entry) for name, entry in servers.items()]


# -- connections ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MCPToolInfo:
    """A tool offered by a server: the name the model uses, and its server's description."""

    name: str
    server: str
    tool: str
    description: str
    input_schema: dict[str, Any]

    def to_function(self) -> dict[str, Any]:
        """The OpenAI function-calling form, as listed in the instructions."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema or {"type": "object", "properties": {}},
            },
        }


class Connection:
    """One open MCP session, held by a task of the background loop."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.client: Any = None
        self.tools: list[Any] = []
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stderr: TextIO | None = None

    def stderr_tail(self, limit: int = 1500) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-limit:].strip()
        except (OSError, ValueError):
            return ""

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        c = self.config
        if c.command is not None:
            params = StdioServerParameters(
                command=c.command, args=list(c.args), env=dict(c.env) if c.env else None, cwd=c.cwd
            )
            if self._stderr is None:
                # kept open for the connection's life (closed by close_stderr)
                stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
                self._stderr = cast("TextIO", stderr)
            return stdio_client(params, errlog=self._stderr)
        assert c.url is not None  # from_dict sets one of command/url
        if c.headers:
            import httpx2

            http = httpx2.AsyncClient(
                headers=dict(c.headers), timeout=httpx2.Timeout(30.0, read=300.0)
            )
            return _with_client(stack, http, streamable_http_client(c.url, http_client=http))
        return streamable_http_client(c.url)

    async def open(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready, self._stop))
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self.aclose()
            raise TimeoutError(f"no answer within {timeout:g} s") from None
        except BaseException:
            await self.aclose()
            raise
        finally:
            if ready.done() and not ready.cancelled():
                ready.exception()  # mark it retrieved: the error is raised here, not logged

    async def _hold(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = self._transport(stack)
                client = await stack.enter_async_context(Client(transport))
                tools: list[Any] = []
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.client, self.tools = client, tools
                ready.set_result(None)
                await stop.wait()
        except Exception as e:
            if not ready.done():
                ready.set_exception(e)
        except BaseException:
            if not ready.done():
                ready.set_exception(ConnectionError("the connection was cancelled"))
            raise
        finally:
            self.client = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done()

    async def aclose(self, timeout: float = 5.0) -> None:
        task, self._task = self._task, None
        if task is not None:
            if self._stop is not None:
                self._stop.set()
            try:
                await asyncio.wait_for(task, timeout)
            except (TimeoutError, asyncio.CancelledError, Exception):
                task.cancel()
        self.client = None

    def close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _with_client(stack: contextlib.AsyncExitStack, http: Any, transport: Any) -> Any:
    """Close ``http`` with ``stack`` (the transport does not own a client it was given)."""
    stack.push_async_callback(http.aclose)
    return transport


class LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gemgym-mcp", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("MCPTool cannot be called from its own event loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


def shutdown_all(loop: LoopThread, connections: list[Connection]) -> None:
    async def close_all() -> None:
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)

    if not loop.loop.is_closed() and loop.thread.is_alive():
        with contextlib.suppress(Exception):
            loop.run(close_all(), timeout=15)
    loop.stop()
    for c in connections:
        c.close_stderr()


def is_connection_error(e: BaseException) -> bool:
    import anyio

    if isinstance(
        e,
        ConnectionError
        | EOFError
        | anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream,
    ):
        return True
    from mcp import MCPError

    return isinstance(e, MCPError) and "closed" in str(e.error.message).lower()


def describe_error(e: BaseException) -> str:
    """``Type: message`` of the first real error inside (nested) exception groups."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


def result_text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource":
            res = block.resource
            parts.append(getattr(res, "text", None) or f"[resource {res.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(str(block))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) if parts else "(no output)"
