"""GEM's sample time MCP server (``gem.tools.mcp_server.time_mcp``) in the layer."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from helpers.extras import reason

pytest.importorskip("mcp", reason=reason("mcp", "could not import mcp"))

from gemgym.compat.gem.tools.mcp_server.time_mcp import (
    _moment_to_strftime,
    _parse_dt,
    app,
)
from helpers.net import free_port, wait_for_port


def _run(name: str, **arguments: object) -> str:
    async def call() -> str:
        tool = await app.get_tool(name)
        result = await tool.run(arguments)
        return str(result.content[0].text)

    return asyncio.run(call())


def test_tools_answer_as_gems_server() -> None:
    assert _run("days_in_month", date="2024-02-01") == "29"
    assert _run("days_in_month", date="1900-02-01") == "28"
    assert _run("get_week_year", date="2023-01-01") == "week: 0, isoWeek: 52"
    assert _run("get_timestamp", time="2023-01-01 12:30:45.123").endswith("123")
    got = _run(
        "convert_time",
        sourceTimezone="UTC",
        targetTimezone="Asia/Shanghai",
        time="2023-01-01 20:00:00",
    )
    assert got == "2023-01-02 04:00:00"
    ahead = (time.time() + 2 * 3600 + 30) // 1
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ahead))
    assert _run("relative_time", time=stamp) == "in 2 hours"
    assert _moment_to_strftime("h:mm A") == "%-I:%M %p"
    assert _parse_dt("2023-01-01 12:30:45.5").microsecond == 500000
    with pytest.raises(ValueError):
        _run("days_in_month", date="not-a-date")


def test_the_server_runs_through_the_switch_and_the_layers_mcp_tool_calls_it() -> None:
    from gemgym.compat.gem.tools.mcp_tool import MCPTool

    port = free_port()
    cmd = [sys.executable, "-m", "gemgym.compat.gem", "-m", "gem.tools.mcp_server.time_mcp"]
    with subprocess.Popen(
        [*cmd, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        try:
            wait_for_port(port, process=proc, what="GEM's time MCP server")
            tool = MCPTool.from_url(f"http://127.0.0.1:{port}/time-mcp", validate_on_init=False)
            try:
                action = (
                    "<tool_call><tool_name>days_in_month</tool_name>"
                    '<arguments>{"date": "2025-03-01"}</arguments></tool_call>'
                )
                parsed, error, obs, _ = tool.execute_action(action)
                assert (parsed, error) == (True, False) and "31" in obs
            finally:
                tool.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
