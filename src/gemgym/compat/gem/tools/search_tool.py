"""``gem.tools.search_tool``: GEM's ``SearchTool`` on gemgym's.

As in GEM the URL may come later: ``search_url`` (or ``$SEARCH_URL``) is read on the first
search; without one, that search raises ``ValueError``. Requests use GEM's wire format (one
MessagePack ``{"query", "topk", "return_scores"}`` per search, a flat list back), so the tool
works against GEM's retrieval server and ``gemgym serve-retriever`` alike; the documents are
formatted as GEM does (``Doc i(Title: first line) rest``, one line each); a failed search is
GEM's ``[SearchTool Error: ...]`` observation.
"""

from __future__ import annotations

import os
import re
from typing import Any

from gemgym.compat.gem.tools.base_tool import GemgymTool

__all__ = ["INSTRUCTIONS", "SearchTool"]

_CALL = re.compile(r"<search>(.*?)</search>", re.DOTALL)

INSTRUCTIONS = (
    "You have access to a search engine to help answer questions.\n\n"
    "Additional instructions:\n"
    "- If your initial reasoning in <think> shows you lack some knowledge, explain what you need "
    "to find next inside a new <think> block.\n"
    "- Then issue a search query using:\n"
    "  <search> your query here </search>\n"
    "- The search engine will provide results inside:\n"
    "  <information> ... </information>\n"
    "- You may repeat the <think> and <search> steps as many times as needed.\n"
    "- When you are ready, give your final answer in:\n"
    "  <answer> your answer here </answer>"
)
"""GEM's instructions for the search tool, word for word."""


def _gem_wire_tool(url: str, topk: int, timeout: float) -> Any:
    """gemgym's SearchTool speaking GEM's wire format: one MessagePack ``{"query", "topk",
    "return_scores"}`` per search, answered by a flat list (GEM's mosec server and ``gemgym
    serve-retriever`` both answer it)."""
    from gemgym.errors import missing_dependency
    from gemgym.tools.search import SearchTool as _Search

    try:
        import msgpack  # type: ignore[import-untyped]
    except ImportError as e:
        raise missing_dependency("msgpack", "search") from e

    class _GemWire(_Search):
        def search(self, query: str) -> list[dict[str, Any]]:
            body = msgpack.packb({"query": query, "topk": self.topk, "return_scores": True})
            raw = self.post(body, "application/msgpack")  # gemgym's HTTP client
            try:
                result = msgpack.unpackb(raw, raw=False)["result"]
                return [hit["document"] for hit in result]
            except Exception as e:
                raise RuntimeError(f"{type(e).__name__}: {e}") from e

    return _GemWire(url, topk=topk, timeout=timeout)


class SearchTool(GemgymTool):
    """``<search>query</search>`` answered by a retrieval server."""

    tool_type = "search"

    def __init__(
        self,
        num_workers: int = 1,
        search_url: str | None = None,
        topk: int = 3,
        timeout: float = 5,
    ) -> None:
        super().__init__(num_workers)
        self.search_url = search_url
        self.topk = topk
        self.timeout = timeout

    def _make_tool(self) -> Any:
        url = self.search_url or os.environ.get("SEARCH_URL")
        if not url:
            raise ValueError("search_url must be provided for SearchTool.")
        self.search_url = url
        return _gem_wire_tool(url, self.topk, float(self.timeout))

    def instruction_string(self) -> str:
        return INSTRUCTIONS

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        if not isinstance(action, str):
            return False, True, "", ""
        match = _CALL.search(action)
        if match is None:
            return False, True, "", ""  # no search asked for: no server needed yet
        query, parsed_action = match.group(1).strip(), action[: match.end()]
        tool = self.tool  # no URL: ValueError, as GEM
        try:
            docs = tool.search(query)
        except Exception as e:  # GEM reports every failure in the observation
            return True, True, f"[SearchTool Error: {e}]", parsed_action
        text = ""
        for i, doc in enumerate(docs):
            content = str(doc.get("contents", "")) if isinstance(doc, dict) else str(doc)
            title, _, body = content.partition("\n")
            text += f"Doc {i + 1}(Title: {title}) {body}\n"
        return True, False, text, parsed_action
