"""MCPTool against real MCP servers: the shipped example server over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.extras import reason

pytest.importorskip("mcp", reason=reason("mcp", "could not import mcp"))

from gemgym.errors import ClosedError, ConfigError, ToolError
from gemgym.tools.base import ToolCall, ToolResult
from gemgym.tools.mcp import MCPServerConfig, MCPTool, parse_tool_call
from gemgym.tools.mcp_servers.example import evaluate
from helpers.net import free_port, wait_for_port

EXAMPLE = [sys.executable, "-m", "gemgym.tools.mcp_servers.example"]
EXAMPLE_TOOLS = ["add_note", "calculate", "list_notes", "now", "read_note", "sleep"]


def _call(tool: MCPTool, name: str, **arguments: Any) -> ToolResult:
    call = tool.parse(
        f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
    )
    assert call is not None
    return tool.execute(call)


def _text(result: ToolResult) -> str:
    obs = result.observation
    assert obs.startswith("\n<tool_response>\n") and obs.endswith("\n</tool_response>\n"), obs
    return obs[len("\n<tool_response>\n") : -len("\n</tool_response>\n")]


@pytest.fixture(scope="module")
def stdio_tool() -> Iterator[MCPTool]:
    tool = MCPTool.from_command(EXAMPLE[0], EXAMPLE[1:], timeout=10)
    yield tool
    tool.close()


@contextlib.contextmanager
def _http_server(port: int) -> Iterator[str]:
    """The example server over streamable HTTP on loopback, as a subprocess."""
    with subprocess.Popen(
        [*EXAMPLE, "--http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        try:
            wait_for_port(port, process=proc, what="the example MCP server (HTTP)")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with _http_server(free_port()) as url:
        yield url


# -- parsing (no server) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "name", "arguments"),
    [
        (
            'x <tool_call><tool_name>calc</tool_name><arguments>{"a": 1}</arguments></tool_call> y',
            "calc",
            {"a": 1},
        ),
        (
            "<tool_call>\n<tool_name> calc </tool_name>\n<arguments>\n</arguments>\n</tool_call>",
            "calc",
            {},
        ),
        (
            '<tool_call>{"name": "calc", "arguments": {"a": [1, 2]}}</tool_call>',
            "calc",
            {"a": [1, 2]},
        ),
        ('<tool_call>\n{"name": "calc", "parameters": {"a": 1}}\n</tool_call>', "calc", {"a": 1}),
        ('<tool_call>{"name": "calc", "arguments": "{\\"a\\": 1}"}</tool_call>', "calc", {"a": 1}),
        ('<tool_call>{"name": "calc"}</tool_call>', "calc", {}),
    ],
)
def test_parse_gem_and_json_formats(action: str, name: str, arguments: dict[str, Any]) -> None:
    parsed = parse_tool_call(action)
    assert parsed is not None
    assert parsed[:3] == (name, arguments, None)
    assert parsed[3] == action[: action.index("</tool_call>") + len("</tool_call>")]


@pytest.mark.parametrize(
    ("action", "error"),
    [
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', '"name"'),
        ('<tool_call>{"name": "", "arguments": {}}</tool_call>', "non-empty"),
        ('<tool_call>{"name": "c", "arguments": [1]}</tool_call>', "JSON object"),
        ("<tool_call><tool_name>c</tool_name><arguments>{x</arguments></tool_call>", "not valid"),
    ],
)
def test_malformed_calls_parse_with_an_error(action: str, error: str) -> None:
    parsed = parse_tool_call(action)
    assert parsed is not None and parsed[2] is not None and error in parsed[2]


def test_no_call_and_first_call_only() -> None:
    assert parse_tool_call("<answer>4</answer>") is None
    assert parse_tool_call("<tool_call>{unclosed") is None
    two = '<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>'
    parsed = parse_tool_call(two)
    assert parsed is not None and parsed[0] == "a"


@pytest.mark.parametrize(
    ("expression", "value"),
    [("(2 + 3) * sqrt(16)", 20.0), ("2 ** 10", 1024), ("-7 // 2", -4), ("round(pi, 2)", 3.14)],
)
def test_example_calculator(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "2 ** 100000", "1 / 0", "x", "'a'"])
def test_example_calculator_refuses(expression: str) -> None:
    with pytest.raises(ValueError):
        evaluate(expression)


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "exactly one"),
        ({"command": "x", "url": "http://h/mcp"}, "exactly one"),
        ({"command": "x", "args": "a b"}, "list of strings"),
        ({"command": "x", "env": {"A": 1}}, "strings"),
        ({"url": "h:1/mcp"}, "http://"),
        ({"url": "http://h/sse", "transport": "sse"}, "not supported"),
        ({"command": "x", "argv": []}, "unknown keys"),
    ],
)
def test_bad_server_entries_raise_config_error(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        MCPServerConfig.from_dict("s", entry)


def test_bad_configs_raise_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mcpServers"):
        MCPTool({"mcpServers": {}})
    with pytest.raises(ConfigError, match="cannot read"):
        MCPTool.from_config_file(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        MCPTool.from_config_file(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="timeout"):
        MCPTool.from_command("x", timeout=0)
    with pytest.raises(ConfigError, match="from_config_file"):
        MCPTool("mcp.json")


def test_a_server_that_fails_to_start_is_a_tool_error_with_its_stderr() -> None:
    code = "import sys; sys.stderr.write('no database configured'); sys.exit(1)"
    with pytest.raises(ToolError, match="no database configured"):
        MCPTool.from_command(sys.executable, ["-c", code], connect_timeout=30)


def test_an_unreachable_url_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="cannot connect to MCP server 'default'"):
        MCPTool.from_url(f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=5)


# -- stdio ----------------------------------------------------------------------------------------


def test_stdio_lists_tools_and_puts_schemas_in_the_instructions(stdio_tool: MCPTool) -> None:
    assert sorted(stdio_tool.tools) == EXAMPLE_TOOLS
    text = stdio_tool.instructions()
    assert "<tool_name>TOOL_NAME</tool_name>" in text and '"name": "TOOL_NAME"' in text
    functions = [
        json.loads(line) for line in text.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    ]
    calc = next(f["function"] for f in functions if f["function"]["name"] == "calculate")
    assert calc["parameters"]["required"] == ["expression"]
    assert "arithmetic" in calc["description"]


def test_stdio_calls_in_both_formats(stdio_tool: MCPTool) -> None:
    gem = stdio_tool.parse(
        "<think>use the calculator</think><tool_call><tool_name>calculate</tool_name>"
        '<arguments>{"expression": "(2 + 3) * sqrt(16)"}</arguments></tool_call> trailing'
    )
    assert gem is not None and gem.raw.endswith("</tool_call>")
    result = stdio_tool.execute(gem)
    assert result.ok and _text(result) == "20.0"
    assert result.info["structured"] == {"result": 20.0}
    assert _text(_call(stdio_tool, "calculate", expression="2 ** 10")) == "1024"


def test_server_state_persists_between_calls(stdio_tool: MCPTool) -> None:
    assert _call(stdio_tool, "add_note", title="shopping", text="eggs, milk").ok
    assert _text(_call(stdio_tool, "read_note", title="shopping")) == "eggs, milk"
    assert "shopping" in _text(_call(stdio_tool, "list_notes"))


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("calculate", {"expression": "1/0"}, "division by zero"),
        ("now", {"timezone": "Mars/Olympus"}, "unknown time zone"),
        ("calculate", {"expr": "1"}, "expression"),  # schema violation
        ("nope", {}, "no tool named 'nope'; available tools: add_note, calculate"),
    ],
)
def test_failures_are_error_observations(
    stdio_tool: MCPTool, name: str, arguments: dict[str, Any], message: str
) -> None:
    result = _call(stdio_tool, name, **arguments)
    assert not result.ok
    assert _text(result).startswith("[Tool execution error: ")
    assert message in result.observation


def test_malformed_call_is_an_error_observation(stdio_tool: MCPTool) -> None:
    call = stdio_tool.parse("<tool_call>{oops}</tool_call>")
    assert call is not None
    result = stdio_tool.execute(call)
    assert not result.ok and "not valid JSON" in result.observation


@pytest.mark.flaky(reruns=2)  # wall-clock bound: a busy machine can miss it once
def test_timeout_is_an_error_observation_and_the_session_survives(stdio_tool: MCPTool) -> None:
    stdio_tool.timeout = 0.5
    try:
        start = time.perf_counter()
        result = _call(stdio_tool, "sleep", seconds=5)
        assert time.perf_counter() - start < 3
        assert not result.ok and "timed out after 0.5 s" in result.observation
        assert result.info["timeout"] is True
    finally:
        stdio_tool.timeout = 10
    assert _text(_call(stdio_tool, "calculate", expression="1 + 1")) == "2"


def test_execute_from_threads_and_inside_a_running_loop(stdio_tool: MCPTool) -> None:
    results: list[str] = []

    def worker(i: int) -> None:
        results.append(_text(_call(stdio_tool, "calculate", expression=f"{i} * 10")))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=int) == [str(i * 10) for i in range(6)]

    async def inside_loop() -> list[str]:
        sync = _text(_call(stdio_tool, "calculate", expression="7 * 6"))  # blocks this loop, works
        calls = [
            stdio_tool.parse(
                f'<tool_call>{{"name": "calculate", "arguments": {{"expression": "{i} + 1"}}}}</tool_call>'
            )
            for i in range(8)
        ]
        done = await asyncio.gather(*(stdio_tool.aexecute(c) for c in calls if c is not None))
        return [sync, *(_text(r) for r in done)]

    assert asyncio.run(inside_loop()) == ["42", *(str(i + 1) for i in range(8))]


def test_close_stops_the_server_and_is_idempotent() -> None:
    tool = MCPTool.from_command(EXAMPLE[0], EXAMPLE[1:])
    clone = copy.deepcopy(tool)  # env.spawn() deep-copies tools: a new session, same server
    try:
        assert clone is not tool and sorted(clone.tools) == EXAMPLE_TOOLS
        assert _call(tool, "add_note", title="a", text="only in the first server").ok
        assert not _call(clone, "read_note", title="a").ok  # its own server process
    finally:
        clone.close()
    before = _children()
    assert before  # the stdio servers run as our children
    tool.close()
    tool.close()
    deadline = time.monotonic() + 10
    while len(_children()) >= len(before) and time.monotonic() < deadline:
        time.sleep(0.1)
    after = _children()
    assert len(after) == len(before) - 1 and after < before  # its server exited, no other
    call = ToolCall("mcp", {"name": "calculate", "arguments": {}, "error": None}, "")
    with pytest.raises(ClosedError):
        tool.execute(call)


def _children() -> set[int]:
    """Pids of live child processes of this process running the example server."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat[0], int(stat[1])
        if ppid == os.getpid() and state != "Z" and b"mcp_servers.example" in cmdline:
            out.add(int(entry.name))
    return out


def test_a_crashed_server_is_restarted_and_the_call_retried(tmp_path: Path) -> None:
    server = tmp_path / "flaky.py"
    marker = tmp_path / "crashed"
    server.write_text(
        "import os, sys\n"
        "from mcp.server.mcpserver import MCPServer\n"
        "app = MCPServer('flaky', log_level='WARNING')\n"
        "@app.tool()\n"
        "def pid() -> int:\n"
        "    '''The server's process id.'''\n"
        "    return os.getpid()\n"
        "@app.tool()\n"
        "def once() -> str:\n"
        "    '''Crash the first time, answer afterwards.'''\n"
        f"    if not os.path.exists({str(marker)!r}):\n"
        f"        open({str(marker)!r}, 'w').close()\n"
        "        os._exit(3)\n"
        "    return 'ok'\n"
        "app.run()\n"
    )
    tool = MCPTool.from_command(sys.executable, [str(server)], retries=1, retry_delay=0.0)
    try:
        first_pid = int(_text(_call(tool, "pid")))
        result = _call(tool, "once")  # the server dies mid-call; a new one answers the retry
        assert result.ok and _text(result) == "ok"
        assert result.info["attempts"] == 2
        assert int(_text(_call(tool, "pid"))) != first_pid
    finally:
        tool.close()


# -- streamable HTTP and several servers -------------------------------------------------------


@pytest.mark.parametrize("headers", [None, {"X-Client": "gemgym-test"}])
def test_streamable_http_server(http_url: str, headers: dict[str, str] | None) -> None:
    tool = MCPTool.from_url(http_url, headers=headers)
    try:
        assert sorted(tool.tools) == EXAMPLE_TOOLS
        assert _text(_call(tool, "calculate", expression="6 * 7")) == "42"
        assert not _call(tool, "sleep", seconds=100).ok  # refused by the server: an observation
    finally:
        tool.close()
    gem_style = MCPTool(http_url)  # GEM's MCPTool("http://...")
    try:
        assert _text(_call(gem_style, "calculate", expression="1 + 1")) == "2"
    finally:
        gem_style.close()


def test_http_server_down_then_back() -> None:
    port = free_port()
    with _http_server(port) as url:
        tool = MCPTool.from_url(url, retries=1, retry_delay=0.0, connect_timeout=10)
        assert _call(tool, "calculate", expression="1 + 1").ok
    try:
        down = _call(tool, "calculate", expression="1 + 1")  # the server is gone
        assert not down.ok and "cannot connect" in down.observation
        assert "ConnectError" in down.observation and down.info["attempts"] == 2
        with _http_server(port):
            back = _call(tool, "calculate", expression="2 + 2")  # a new session
            assert back.ok and _text(back) == "4"
    finally:
        tool.close()


def test_config_file_with_several_servers(http_url: str, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "web": {"url": http_url},
                    "local": {"command": EXAMPLE[0], "args": EXAMPLE[1:], "env": {"LANG": "C"}},
                }
            }
        )
    )
    tool = MCPTool.from_config_file(config, timeout=10)
    try:
        assert sorted(tool.tools) == sorted(
            [f"local_{t}" for t in EXAMPLE_TOOLS] + [f"web_{t}" for t in EXAMPLE_TOOLS]
        )
        assert tool.tools["web_calculate"].server == "web"
        assert _call(tool, "web_add_note", title="where", text="on the HTTP server").ok
        assert _text(_call(tool, "web_read_note", title="where")) == "on the HTTP server"
        assert not _call(tool, "local_read_note", title="where").ok  # another server
        ambiguous = _call(tool, "calculate", expression="1")  # both servers have it
        assert not ambiguous.ok and "local_calculate" in ambiguous.observation
        assert "[web]" not in tool.instructions() and '"name": "web_now"' in tool.instructions()
    finally:
        tool.close()


def test_tool_env_wrapper_with_mcp(stdio_tool: MCPTool) -> None:
    import gemgym
    from gemgym.wrappers.tools import ToolEnvWrapper

    env = ToolEnvWrapper(gemgym.make("game:GuessTheNumber-v0-easy"), [stdio_tool])
    obs, _ = env.reset(seed=0)
    assert '"name": "calculate"' in obs
    obs, reward, terminated, truncated, info = env.step(
        '<tool_call>{"name": "calculate", "arguments": {"expression": "(1 + 20) // 2"}}</tool_call>'
    )
    assert info["use_tool"] and info["tool_type"] == "mcp" and "10" in obs
    assert not terminated and not truncated
    obs, reward, terminated, truncated, info = env.step(r"\boxed{10}")
    assert not info["use_tool"]


def test_missing_mcp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemgym.errors import DependencyNotInstalled

    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(DependencyNotInstalled, match=r"gemgym\[mcp\]"):
        MCPTool.from_command("python")
