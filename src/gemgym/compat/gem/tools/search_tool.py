"""``gem.tools.search_tool``: GEM's ``SearchTool`` on gemgym's.

As in GEM the URL may come later: ``search_url`` (or ``$SEARCH_URL``) is read on the first
search; without one, that search raises ``ValueError``. Requests use GEM's wire format (one
MessagePack ``{"query", "topk", "return_scores"}`` per search, a flat list back), so the tool
works against GEM's retrieval server and ``gemgym serve-retriever`` alike; the documents are
formatted by gemgym's :class:`~gemgym.tools.search.SearchTool`.
"""

from __future__ import annotations

import os
import re
from typing import Any

from gemgym.compat.gem.tools.base_tool import GemgymTool

__all__ = ["SearchTool"]

_CALL = re.compile(r"<search>.*?</search>", re.DOTALL)


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
        from gemgym.tools.search import INSTRUCTIONS

        return INSTRUCTIONS

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        if isinstance(action, str) and self._tool is None and not _CALL.search(action):
            return False, True, "", ""  # no search asked for: no server needed yet
        return super().execute_action(action)
