"""``gem.tools.search_tool``: GEM's ``SearchTool`` on gemgym's.

As in GEM the URL may come later: ``search_url`` (or ``$SEARCH_URL``) is read on the first
search; without one, that search raises ``ValueError``. The requests go to the server as gemgym's
tool sends them (``gemgym serve-retriever`` answers both them and GEM's format).
"""

from __future__ import annotations

import os
import re
from typing import Any

from gemgym.compat.gem.tools.base_tool import GemgymTool

__all__ = ["SearchTool"]

_CALL = re.compile(r"<search>.*?</search>", re.DOTALL)


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
        from gemgym.tools.search import SearchTool as _Search

        url = self.search_url or os.environ.get("SEARCH_URL")
        if not url:
            raise ValueError("search_url must be provided for SearchTool.")
        self.search_url = url
        return _Search(url, topk=self.topk, timeout=float(self.timeout))

    def instruction_string(self) -> str:
        from gemgym.tools.search import INSTRUCTIONS

        return INSTRUCTIONS

    def execute_action(self, action: Any) -> tuple[bool, bool, str, str]:
        if isinstance(action, str) and self._tool is None and not _CALL.search(action):
            return False, True, "", ""  # no search asked for: no server needed yet
        return super().execute_action(action)
