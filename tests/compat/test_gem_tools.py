"""GEM's tool API through the layer: BaseTool, ToolEnvWrapper's counting, Python, search, MCP."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import gemgym.compat.gem as gem
from gemgym.compat.gem.tools.base_tool import BaseTool
from gemgym.compat.gem.tools.search_tool import SearchTool
from gemgym.compat.gem.tools.tool_env_wrapper import ToolEnvWrapper
from gemgym.sandbox.bwrap import bwrap_available
from helpers.extras import needs_module, skip_without
from helpers.net import free_port, wait_for_port


class EchoTool(BaseTool):
    """A GEM-style tool: ``<echo>text</echo>``; ``<echo>fail</echo>`` is a failed call."""

    tool_type = "echo"

    def instruction_string(self) -> str:
        return "Echo with <echo>text</echo>."

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        if "<echo>" not in action:
            return False, True, "", ""
        text = action.split("<echo>", 1)[1].split("</echo>", 1)[0]
        return True, text == "fail", f"echo: {text}", action.split("</echo>")[0] + "</echo>"


def test_tool_calls_do_not_count_toward_max_turns() -> None:
    env = gem.make("game:GuessTheNumber-v0-easy", max_turns=2, seed=0)
    env = ToolEnvWrapper(
        env, tools=[EchoTool()], tool_reward=0.1, tool_success_reward=0.2, max_tool_uses=3
    )
    obs, info = env.reset()
    assert obs.endswith("Echo with <echo>text</echo>.") and info["use_tool"] is False
    rewards = []
    for text in ("a", "fail", "b"):
        obs, reward, terminated, truncated, info = env.step(f"<echo>{text}</echo> more")
        assert not (terminated or truncated) and info["use_tool"]
        assert info["parsed_action"] == f"<echo>{text}</echo>"
        rewards.append(reward)
    assert rewards == pytest.approx([0.3, 0.1, 0.3])
    assert "Reached the maximum number of tool use" in obs
    assert (info["tool_use_counter"], info["tool_success_counter"]) == (3, 2)
    # the 4th call is past max_tool_uses: it is the env's move; two moves end the game
    _, _, terminated, truncated, info = env.step("<echo>c</echo> \\boxed{1}")
    assert info["use_tool"] is False and not (terminated or truncated)
    _, _, terminated, truncated, info = env.step("\\boxed{2}")
    assert terminated or truncated
    _, info = env.reset()
    assert info["prev_ep_tool_use_counter"] == 3 and info["tool_use_counter"] == 0


def test_a_failed_call_stays_the_result_when_a_later_tool_does_not_parse() -> None:
    class Never(BaseTool):
        tool_type = "never"

        def instruction_string(self) -> str:
            return "never"

        def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
            return False, True, "", ""

    env = ToolEnvWrapper(
        gem.make("game:GuessTheNumber-v0-easy"),
        tools=[EchoTool(), Never()],
        tool_execute_error_reward=-0.5,
    )
    obs, _ = env.reset(0)
    assert obs.count("Available tools:") == 1
    obs, reward, terminated, _, info = env.step("<echo>fail</echo>")
    assert info["use_tool"] and info["tool_type"] == "echo" and reward == -0.5
    assert not terminated


def test_gemgym_tools_are_accepted_as_gem_tools() -> None:
    from gemgym.tools.base import Tool, ToolCall, ToolResult

    class Upper(Tool):
        name = "upper"

        def instructions(self) -> str:
            return "<up>x</up>"

        def parse(self, action: str) -> ToolCall | None:
            if "<up>" not in action:
                return None
            return ToolCall(self.name, action.split("<up>")[1].split("</up>")[0], action)

        def execute(self, call: ToolCall) -> ToolResult:
            return ToolResult(str(call.arguments).upper())

    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-easy"), tools=[Upper()])
    env.reset(0)
    obs, _, _, _, info = env.step("<up>abc</up>")
    assert obs == "ABC" and info["tool_type"] == "upper"


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_python_code_tool_gem_api() -> None:
    from gemgym.compat.gem.tools.python_code_tool import PythonCodeTool

    tool = PythonCodeTool(timeout=2, keep_error_last_line=True)
    assert "python" in tool.instruction_string().lower()
    parsed, error, obs, raw = tool.execute_action("<python>print(1+1)</python> then text")
    assert (parsed, error, raw) == (True, False, "<python>print(1+1)</python>")
    assert obs.startswith("Code execution result: 2")
    # GEM's parsed action for a reply without code is the whole reply
    assert tool.execute_action("no code") == (False, True, "", "no code")
    assert tool.execute_action(1)[0] is False  # GEM's test passes a non-str action
    parsed, error, obs, _ = tool.execute_action("<python>while True: pass</python>")
    assert parsed and error and "timed out" in obs


def test_search_tool_needs_no_url_until_it_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEARCH_URL", raising=False)
    tool = SearchTool(topk=2)
    assert "<search>" in tool.instruction_string()
    assert tool.execute_action("no search here") == (False, True, "", "")
    with pytest.raises(ValueError, match="search_url must be provided"):
        tool.execute_action("<search>q</search>")


@pytest.fixture(scope="module")
def retriever_url() -> Iterator[str]:
    """``gemgym serve-retriever --sample`` on a free loopback port, as a subprocess."""
    port = free_port()
    cmd = [sys.executable, "-m", "gemgym", "serve-retriever", "--sample", "--quiet"]
    with subprocess.Popen(
        [*cmd, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        try:
            wait_for_port(port, process=proc, what="serve-retriever")
            yield f"http://127.0.0.1:{port}/retrieve"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@skip_without("search")  # the server builds a BM25 index
def test_gems_search_request_gets_gems_answer(retriever_url: str) -> None:
    msgpack = needs_module("msgpack", "search")
    # exactly what GEM's SearchTool posts: raw MessagePack bytes, no content type
    body = msgpack.packb({"query": "heap queue", "topk": 2, "return_scores": True})
    request = urllib.request.Request(retriever_url, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        result = msgpack.unpackb(response.read(), raw=False)["result"]
    # ... and how GEM's SearchTool reads the answer: a flat list of {"document", "score"}
    assert len(result) == 2
    titles = [doc["document"]["contents"].split("\n")[0] for doc in result]
    assert titles[0] == "heapq" and result[0]["score"] > 0
    # gemgym's batch request keeps its list of lists
    batch = json.dumps({"queries": ["heap queue", "bzip2"], "topk": 1}).encode()
    request = urllib.request.Request(
        retriever_url, data=batch, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.loads(response.read())
    assert [len(hits) for hits in answer["result"]] == [1, 1]


@skip_without("search")
def test_layer_search_tool_in_a_gem_episode(retriever_url: str) -> None:
    env = gem.make("game:GuessTheNumber-v0-hard", max_turns=4)
    env = ToolEnvWrapper(env, tools=[SearchTool(search_url=retriever_url, topk=2)], max_tool_uses=3)
    env.reset(0)
    obs, reward, terminated, _, info = env.step("<think>x</think><search>heap queue</search> ...")
    assert "Doc 1(Title: heapq)" in obs and info["use_tool"] and not terminated
    assert info["parsed_action"].endswith("</search>")


def test_mcp_tool_gem_constructors() -> None:
    needs_module("mcp", "mcp")
    from gemgym.compat.gem.tools.mcp_tool import MCPTool

    params = {"command": sys.executable, "args": ["-m", "gemgym.tools.mcp_servers.example"]}
    tool = MCPTool.from_local_command(params, name="calc", validate_on_init=False)
    try:
        names = [t["name"] for t in tool.get_available_tools()]
        assert "calculate" in names and not tool._is_multi_server()
        assert "<tool_call>" in tool.instruction_string()
        action = (
            "<tool_call><tool_name>calculate</tool_name>"
            '<arguments>{"expression": "6*7"}</arguments></tool_call> ...'
        )
        parsed, error, obs, raw = tool.execute_action(action)
        assert (parsed, error) == (True, False) and "42" in obs and raw.endswith("</tool_call>")
        assert tool.execute_action("Dummy action") == (False, True, "", "")
    finally:
        tool.close()
    multi = MCPTool.from_multi_server(
        {"a": "http://127.0.0.1:9/mcp", "b": "http://127.0.0.1:9/mcp"}, validate_on_init=False
    )
    assert multi._get_server_names() == ["a", "b"] and multi._is_multi_server()


@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")
def test_run_python_returns_gems_triple() -> None:
    from gemgym.compat.gem.utils.sandbox import run_python

    assert run_python("print(input() * 2)", "none", stdin="ab") == (True, "abab\n", "")
    ok, out, err = run_python("import sys; sys.exit(3)", "bwrap")
    assert not ok and out == ""
    ok, _, err = run_python("while True: pass", "none", timeout=1)
    assert not ok and "timed out after 1 seconds" in err
