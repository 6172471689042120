"""``gem.tools.mcp_tool``: GEM's ``MCPTool`` on gemgym's :class:`~gemgym.tools.MCPTool`.

GEM's constructors and names: ``MCPTool(config_or_url, validate_on_init=...)``,
``from_url(url, auth=, headers=)``, ``from_config_file(path)``,
``from_local_command({"command": ..., "args": [...], "env": {...}}, name=)``,
``from_multi_server({name: url})``, ``get_available_tools()``, ``instruction_string()``,
``execute_action(action)``. With ``validate_on_init=False`` (as GEM) the servers are contacted on
first use. Tools of several servers are named ``<server>_<tool>`` as in GEM. Connections stay
open (GEM reconnected for every call); GEM's callback handlers are not supported (ignored with a
warning).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gemgym.compat.gem._adapt import warn_ignored
from gemgym.compat.gem.tools.base_tool import GemgymTool

__all__ = ["MCPTool"]

_UNSUPPORTED = ("log_handler", "progress_handler", "sampling_handler", "num_workers")


def _config(config: Mapping[str, Any] | str, auth: Any, headers: Any) -> dict[str, Any]:
    if isinstance(config, str):
        entry: dict[str, Any] = {"url": config}
        hdrs = dict(headers or {})
        if auth:
            hdrs.setdefault("Authorization", f"Bearer {auth}")
        if hdrs:
            entry["headers"] = hdrs
        return {"mcpServers": {"default": entry}}
    servers = config.get("mcpServers", config)
    out: dict[str, Any] = {}
    for name, raw in dict(servers).items():
        entry = {k: v for k, v in dict(raw).items() if k != "transport"}  # fastmcp's key
        out[name] = entry
    return {"mcpServers": out}


class MCPTool(GemgymTool):
    """Call the tools of MCP servers with ``<tool_call>`` (see the module docstring)."""

    tool_type = "mcp"

    def __init__(
        self,
        config: Mapping[str, Any] | str,
        auth: Any = None,
        headers: Mapping[str, str] | None = None,
        max_retries: int = 3,
        delay_between_retries: float = 1.0,
        execution_timeout: float = 30.0,
        validate_on_init: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(int(kwargs.pop("num_workers", 1)))
        for name in kwargs:
            warn_ignored("MCPTool()", name, "not supported by the gemgym layer")
        self.config = _config(config, auth, headers)
        self.max_retries = max_retries
        self.delay_between_retries = delay_between_retries
        self.execution_timeout = execution_timeout
        if validate_on_init:
            _ = self.tool

    def _make_tool(self) -> Any:
        from gemgym.tools.mcp import MCPTool as _MCP

        return _MCP(
            self.config,
            timeout=self.execution_timeout,
            retries=self.max_retries,
            retry_delay=self.delay_between_retries,
        )

    # -- GEM's constructors ----------------------------------------------------------------
    @classmethod
    def from_url(
        cls, url: str, auth: Any = None, headers: Mapping[str, str] | None = None, **kwargs: Any
    ) -> MCPTool:
        """One streamable-HTTP server."""
        return cls(url, auth=auth, headers=headers, **kwargs)

    @classmethod
    def from_config_file(cls, config_path: str, **kwargs: Any) -> MCPTool:
        """An MCP config file (``{"mcpServers": {...}}``)."""
        with open(config_path, encoding="utf-8") as f:
            return cls(json.load(f), **kwargs)

    @classmethod
    def from_local_command(
        cls, server_params: Mapping[str, Any], name: str = "default", **kwargs: Any
    ) -> MCPTool:
        """One stdio server started with ``server_params`` (``command``, ``args``, ``env``)."""
        return cls({"mcpServers": {name: dict(server_params)}}, **kwargs)

    @classmethod
    def from_multi_server(cls, servers: Mapping[str, str], **kwargs: Any) -> MCPTool:
        """Several streamable-HTTP servers, ``{name: url}``; tools become ``<name>_<tool>``."""
        config = {"mcpServers": {n: {"url": u} for n, u in servers.items()}}
        return cls(config, **kwargs)

    # -- GEM's inspection helpers ----------------------------------------------------------
    def get_available_tools(self) -> list[dict[str, Any]]:
        """Every tool: ``name``, ``description``, ``inputSchema`` and ``server_info``."""
        return [
            {
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema,
                "server_info": {"detected_server": t.server, "original_name": t.tool},
            }
            for t in self.tool.tools.values()
        ]

    def _get_server_names(self) -> list[str]:
        return list(self.config["mcpServers"])

    def _is_multi_server(self) -> bool:
        return len(self.config["mcpServers"]) > 1

    def _get_server_description(self) -> str:
        return ", ".join(
            f"{n} ({e.get('url') or e.get('command')})"
            for n, e in self.config["mcpServers"].items()
        )

    def instruction_string(self) -> str:
        text = str(self.tool.instructions())
        if self._is_multi_server():
            servers = sorted({t.server for t in self.tool.tools.values()})
            text += "\n\nServers: " + ", ".join(f"[{s}]" for s in servers)
        return text
