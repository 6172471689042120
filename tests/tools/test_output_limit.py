"""Tool output is cut to a model-sized length, with a marker saying how much was cut."""

from __future__ import annotations

import json
import re
import sys

import pytest

from gemgym.errors import ConfigError
from gemgym.retrieval import BM25Retriever, Document
from gemgym.sandbox.base import Limits, RunRequest, RunResult, Sandbox
from gemgym.tools.base import DEFAULT_MAX_OUTPUT_CHARS, ToolCall, truncate_output
from gemgym.tools.python import PythonTool
from gemgym.tools.search import SearchTool
from helpers.extras import needs_module

CUT = re.compile(r"\[\.\.\. ([\d,]+) characters cut \.\.\.\]")


def _cut(text: str) -> int:
    m = CUT.search(text)
    assert m is not None, f"no truncation marker in {text[:200]!r}"
    return int(m.group(1).replace(",", ""))


def test_truncate_output_keeps_head_and_tail_and_says_what_was_cut() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    out = truncate_output(text, 1_000)
    assert len(out) <= 1_000
    assert out.startswith("HEAD") and out.endswith("TAIL")
    marker = CUT.search(out)
    assert marker is not None
    kept = len(out) - len(marker.group(0)) - 2  # the marker stands on a line of its own
    assert _cut(out) == len(text) - kept
    assert truncate_output("short", 1_000) == "short"
    assert truncate_output(text, None) == text
    assert truncate_output(text, 5) == f"\n[... {len(text):,} characters cut ...]\n"


def test_the_default_fits_a_context_window() -> None:
    assert 2_000 <= DEFAULT_MAX_OUTPUT_CHARS <= 32_000


class BigPrint(Sandbox):
    """A sandbox whose every run prints ``size`` characters (a 5 MB print, without running it)."""

    name = "big-print"

    def __init__(self, size: int) -> None:
        super().__init__(Limits())
        self.size = size

    def _run(self, request: RunRequest, limits: Limits) -> RunResult:
        return RunResult("a" * (self.size - 3) + "END", "", 0)


def test_python_tool_cuts_a_5mb_print() -> None:
    tool = PythonTool(sandbox=BigPrint(5_000_000))
    assert tool.max_output_chars == DEFAULT_MAX_OUTPUT_CHARS
    result = tool.execute(ToolCall("python", "print('a' * 5_000_000)", ""))
    assert result.ok
    assert len(result.observation) <= DEFAULT_MAX_OUTPUT_CHARS
    assert result.observation.startswith("Code execution result: aaa")
    assert result.observation.endswith("END")  # the end of the output is kept too
    assert _cut(result.observation) > 4_990_000


def test_python_tool_limit_is_per_tool_and_the_old_name_still_works() -> None:
    small = PythonTool(sandbox=BigPrint(5_000), max_output_chars=500)
    assert len(small.execute(ToolCall("python", "", "")).observation) <= 500
    old = PythonTool(sandbox=BigPrint(5_000), max_observation_chars=300)
    assert old.max_output_chars == old.max_observation_chars == 300
    assert len(old.execute(ToolCall("python", "", "")).observation) <= 300
    uncut = PythonTool(sandbox=BigPrint(50_000), max_output_chars=None)
    assert len(uncut.execute(ToolCall("python", "", "")).observation) > 50_000


def _retriever() -> BM25Retriever:  # built in the test: it needs gemgym[search]
    return BM25Retriever([Document("0", "Paris", "Paris is the capital of France.")])


@pytest.mark.parametrize("bad", [0, -1, 2.5, "1000", True])
def test_bad_limits_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_output_chars"):
        PythonTool(sandbox=BigPrint(10), max_output_chars=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_output_chars"):
        SearchTool(retriever=_retriever(), max_output_chars=bad)  # type: ignore[arg-type]


def test_conflicting_python_limits_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="max_output_chars"):
        PythonTool(sandbox=BigPrint(10), max_output_chars=100, max_observation_chars=200)


def test_search_tool_cuts_long_documents_inside_the_information_block() -> None:
    docs = [Document(str(i), f"Doc{i}", "capital " + "word " * 20_000) for i in range(3)]
    tool = SearchTool(retriever=BM25Retriever(docs), max_output_chars=2_000)
    call = tool.parse("<search>capital</search>")
    assert call is not None
    obs = tool.execute(call).observation
    assert len(obs) <= 2_000 + len("\n\n<information></information>\n\n")
    assert obs.startswith("\n\n<information>Doc 1(Title: Doc") and obs.endswith(
        "</information>\n\n"
    )
    assert _cut(obs) > 290_000
    default = SearchTool(retriever=BM25Retriever(docs))
    assert default.max_output_chars == DEFAULT_MAX_OUTPUT_CHARS


def test_mcp_tool_cuts_long_results_inside_the_tool_response() -> None:
    needs_module("mcp", "mcp")
    from gemgym.tools.mcp import MCPTool

    example = [sys.executable, "-m", "gemgym.tools.mcp_servers.example"]
    tool = MCPTool.from_command(example[0], example[1:], timeout=10, max_output_chars=1_000)
    try:
        assert tool.max_output_chars == 1_000
        for name, arguments in (
            ("add_note", {"title": "big", "text": "n" * 30_000}),
            ("read_note", {"title": "big"}),
        ):
            call = tool.parse(
                f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"
            )
            assert call is not None
            result = tool.execute(call)
        assert result.ok
        obs = result.observation
        assert obs.startswith("\n<tool_response>\n") and obs.endswith("\n</tool_response>\n")
        assert len(obs) <= 1_000 + len("\n<tool_response>\n\n</tool_response>\n")
        assert _cut(obs) > 29_000
    finally:
        tool.close()
