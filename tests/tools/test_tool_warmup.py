"""Tools and the env I/O contract: which tools block, warmup of the Python tool's sandbox through
ToolEnvWrapper, and a failing sandbox surfacing as ToolError (bad code stays an observation)."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.core import blocks_loop
from gemgym.errors import SandboxError, ToolError
from gemgym.sandbox import Limits, RunRequest, RunResult, Sandbox
from gemgym.sandbox.bwrap import bwrap_available
from gemgym.sandbox.pool import PoolSandbox
from gemgym.tools.base import Tool, ToolCall, ToolResult
from gemgym.tools.mcp import MCPTool
from gemgym.tools.python import PythonTool
from gemgym.tools.search import SearchTool
from gemgym.wrappers.tools import ToolEnvWrapper

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")


class EchoTool(Tool):
    """A tool that works in microseconds: it does not block."""

    name = "echo"

    def __init__(self) -> None:
        self.warmups = 0

    def instructions(self) -> str:
        return "Echo with <echo>text</echo>."

    def parse(self, action: str) -> ToolCall | None:
        return ToolCall(self.name, action, action) if action.startswith("<echo>") else None

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult(str(call.arguments))

    def warmup(self) -> None:
        self.warmups += 1


class BrokenSandbox(Sandbox):
    """A sandbox whose machinery fails on every run (not the code's fault)."""

    name = "broken"

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        raise SandboxError("the sandbox worker died")


def _game() -> gemgym.Env[str, str]:
    return gemgym.make("game:GuessTheNumber-v0-easy")


def test_which_tools_block() -> None:
    assert PythonTool.blocking_io and SearchTool.blocking_io
    assert not MCPTool.blocking_io  # its aexecute truly awaits the server
    assert not Tool.blocking_io and not EchoTool.blocking_io


def test_the_wrapper_blocks_when_one_of_its_tools_does() -> None:
    assert not blocks_loop(_game())
    assert not blocks_loop(ToolEnvWrapper(_game(), [EchoTool()]))
    with_python = ToolEnvWrapper(_game(), [EchoTool(), PythonTool()])
    assert with_python.blocking_io and blocks_loop(with_python)
    assert blocks_loop(with_python.spawn())


@needs_bwrap
def test_warmup_starts_the_python_tools_sandbox_and_the_inner_envs() -> None:
    sandbox = PoolSandbox(Limits(timeout=5), size=1)
    echo = EchoTool()
    env = ToolEnvWrapper(_game(), [PythonTool(sandbox=sandbox), echo])
    try:
        env.warmup()
        env.warmup()  # twice is fine
        assert sandbox._started == 1 and len(sandbox._idle) == 1
        assert echo.warmups == 2
        env.reset(seed=0)
        obs, *_ = env.step("<python>print(6 * 7)</python>")
        assert "42" in obs
    finally:
        env.close()
        sandbox.close()
    assert sandbox._started == 0 and sandbox._idle == []


def test_a_closed_wrappers_warmup_starts_nothing() -> None:
    sandbox = PoolSandbox(Limits(timeout=5), size=1) if bwrap_available() else None
    echo = EchoTool()
    tools: list[Tool] = [echo] + ([PythonTool(sandbox=sandbox)] if sandbox is not None else [])
    env = ToolEnvWrapper(_game(), tools)
    env.close()
    env.warmup()
    assert echo.warmups == 0
    if sandbox is not None:
        assert sandbox._started == 0
        sandbox.close()


def test_a_failing_sandbox_is_a_tool_error_and_bad_code_an_observation() -> None:
    tool = PythonTool(sandbox=BrokenSandbox())
    call = tool.parse("<python>print(1)</python>")
    assert call is not None
    with pytest.raises(ToolError, match="worker died") as caught:
        tool.execute(call)
    assert isinstance(caught.value.__cause__, SandboxError)
    if bwrap_available():
        bad = PythonTool(sandbox=PoolSandbox(Limits(timeout=5), size=1))
        try:
            result = bad.execute(ToolCall("python", "1/0", "<python>1/0</python>"))
        finally:
            bad.sandbox.close()
        assert not result.ok and "ZeroDivisionError" in result.observation
