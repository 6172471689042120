"""``SearchTool``: ``<search>query</search>`` answered by a retrieval server or a local index.

The model writes a query between ``<search>`` tags (GEM's and Search-R1's format); the tool
returns the top-k documents formatted as GEM does::

    <information>Doc 1(Title: heapq) Heap queue algorithm (a.k.a. priority queue). ...
    Doc 2(Title: ...) ...
    </information>

Two ways to answer a query, chosen by the constructor:

* ``SearchTool(url="http://host:port/retrieve")`` posts to a retrieval server (``gemgym
  serve-retriever`` or a Search-R1/GEM server); ``$SEARCH_URL`` is used when neither ``url``
  nor ``retriever`` is given, as in GEM. A URL without a path gets ``/retrieve``.
* ``SearchTool(retriever=BM25Retriever(...))`` searches an in-process index (no server).

Failures of a search (server down, timeout, bad answer) never raise: they become the
observation ``[SearchTool Error: ...]`` with ``ok=False``, as in GEM.

Requests to a server go through gemgym's HTTP client (:mod:`gemgym._http`: kept-alive
connections shared by every call and thread); the ``url`` form needs ``pip install
"gemgym[search]"``.

Differences from GEM: requests are JSON by default (``encoding="msgpack"`` speaks GEM's
MessagePack; ``gemgym serve-retriever`` accepts both); an empty query is an error observation instead of a search for nothing; the timeout
covers the whole request; a query that matches nothing says so instead of returning an empty
``<information>`` block.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Literal

from gemgym.errors import ConfigError, missing_dependency
from gemgym.retrieval.index import Retriever
from gemgym.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    Tool,
    ToolCall,
    ToolResult,
    check_max_output_chars,
    truncate_output,
)

if TYPE_CHECKING:
    from gemgym._http import SyncClient

__all__ = ["SearchTool", "format_documents"]

_SEARCH_RE = re.compile(r"<search>(.*?)</search>", re.DOTALL)

# GEM's prompt (from Search-R1), kept word for word: policies trained with GEM's search tool
# expect exactly this text, and GEM's QA results were measured with it.
INSTRUCTIONS = (
    "You are provided with a search engine to help answer questions.\n\n"
    "Instructions:\n"
    "- Always conduct reasoning inside:\n"
    "  <think> your reasoning here </think>\n"
    "- After reasoning, if knowledge is missing, issue a search query:\n"
    "  <search> your query </search>\n"
    "- The search engine returns results inside:\n"
    "  <information> ... </information>\n"
    "- You can search as many times as needed.\n"
    "- When ready, give the final concise answer using:\n"
    "  <answer> your answer </answer>\n\n"
    "Example:\n"
    "<think> I need to find the capital of China. </think>\n"
    "<search> capital of China </search>\n"
    "<information> Beijing is the capital of China. </information>\n"
    "<think> The capital is Beijing. </think>\n"
    "<answer> Beijing </answer>"
)


def format_documents(documents: list[dict[str, Any]]) -> str:
    """GEM's layout: ``Doc i(Title: title) text`` per line, from Search-R1 style documents.

    A document has ``contents`` (title on the first line) or ``title`` and ``text``.
    """
    lines = []
    for i, doc in enumerate(documents, 1):
        if "title" in doc or "text" in doc:
            title, text = str(doc.get("title", "")), str(doc.get("text", ""))
        else:
            title, _, text = str(doc.get("contents", "")).partition("\n")
        lines.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(lines)


def _retrieve_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"search url must be http(s)://host:port[/path], got {url!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/retrieve")
    return urllib.parse.urlunsplit(parts)


class SearchTool(Tool):
    """Search a corpus with ``<search>query</search>``.

    Args:
        url: a retrieval server's ``/retrieve`` endpoint (default: ``$SEARCH_URL``).
        retriever: an in-process :class:`~gemgym.retrieval.index.Retriever` instead of a server.
        topk: documents returned per query (GEM: 3).
        timeout: seconds allowed for one search request to the server.
        encoding: ``"json"`` (Search-R1 and ``gemgym serve-retriever``) or ``"msgpack"`` (GEM's
            mosec retrieval server only speaks MessagePack; needs the ``msgpack`` package).
        max_output_chars: cut the documents shown to this many characters (inside the
            ``<information>`` block, with a ``[... N characters cut ...]`` line; ``None``: no cut).
    """

    name = "search"

    blocking_io = True

    def __init__(
        self,
        url: str | None = None,
        *,
        retriever: Retriever | None = None,
        topk: int = 3,
        timeout: float = 5.0,
        encoding: Literal["json", "msgpack"] = "json",
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        self.max_output_chars = check_max_output_chars(max_output_chars)
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise ConfigError(f"topk must be a positive int, got {topk!r}")
        if not timeout > 0:
            raise ConfigError(f"timeout must be positive, got {timeout!r}")
        if encoding not in ("json", "msgpack"):
            raise ConfigError(f"encoding must be 'json' or 'msgpack', got {encoding!r}")
        if encoding == "msgpack":
            try:
                import msgpack  # type: ignore[import-untyped]  # noqa: F401
            except ImportError as e:
                raise missing_dependency("msgpack", "search") from e
        self.encoding = encoding
        if url is not None and retriever is not None:
            raise ConfigError("give SearchTool a url or a retriever, not both")
        if url is None and retriever is None:
            url = os.environ.get("SEARCH_URL") or None
            if url is None:
                raise ConfigError(
                    "SearchTool needs a retrieval server url (or $SEARCH_URL) or a retriever; "
                    "start one with: gemgym serve-retriever --corpus docs.jsonl --port 8000"
                )
        self.url = _retrieve_url(url) if url is not None else None
        self.retriever = retriever
        self.topk = topk
        self.timeout = float(timeout)
        self._http: SyncClient | None = None
        if self.url is not None:
            from gemgym._http import require

            require("search")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_http"] = None  # connections stay in this process; a copy opens its own
        return state

    def close(self) -> None:
        """Close the connections to the server (idempotent; a later search opens new ones)."""
        http, self._http = self._http, None
        if http is not None:
            http.close()

    def post(self, body: bytes, content_type: str) -> bytes:
        """POST ``body`` to :attr:`url`; the answer's body (raises ``RuntimeError`` with the
        reason: no answer in time, no server, an HTTP error)."""
        from gemgym._http import SyncClient, TransportError

        assert self.url is not None  # one of url/retriever is set by __init__
        if self._http is None:
            self._http = SyncClient(
                self.url,
                timeout=self.timeout,
                connect_timeout=self.timeout,
                extra="search",
                name="url",
            )
        try:
            response = self._http.request(
                "POST", body=body, content_type=content_type, headers={"Accept": content_type}
            )
        except TransportError as e:
            if e.kind == "timeout" or (e.kind == "connect" and e.seconds is not None):
                raise RuntimeError(f"search timed out after {self.timeout:g} s") from e
            if e.kind == "connect":
                raise RuntimeError(
                    f"cannot reach the retrieval server at {self.url}: {e.detail}"
                ) from e
            raise RuntimeError(
                f"the retrieval server at {self.url} broke the connection: {e.detail}"
            ) from e
        if response.status >= 400:
            raise RuntimeError(f"server answered {response.status}: {response.text[:300]}")
        return response.body

    def instructions(self) -> str:
        """GEM's search-engine instructions (think, search, information, answer)."""
        return INSTRUCTIONS

    def parse(self, action: str) -> ToolCall | None:
        """The first ``<search>...</search>``; ``raw`` is the action up to its end."""
        m = _SEARCH_RE.search(action)
        if m is None:
            return None
        return ToolCall(self.name, m.group(1).strip(), action[: m.end()])

    def search(self, query: str) -> list[dict[str, Any]]:
        """The top-k documents for ``query`` (Search-R1 dicts); raises on failure."""
        if self.retriever is not None:
            return [h.document.to_dict() for h in self.retriever.search(query, self.topk)]
        payload = {"queries": [query], "topk": self.topk, "return_scores": True}
        if self.encoding == "msgpack":
            import msgpack

            raw = self.post(msgpack.packb(payload), "application/msgpack")
            answer = msgpack.unpackb(raw, raw=False)
        else:
            raw = self.post(json.dumps(payload).encode("utf-8"), "application/json")
            answer = json.loads(raw.decode("utf-8"))
        try:
            hits = answer["result"][0]
            return [h.get("document", h) for h in hits]
        except (KeyError, IndexError, TypeError) as e:
            raise RuntimeError(
                f"unexpected answer from the retrieval server: {answer!r:.200}"
            ) from e

    def execute(self, call: ToolCall) -> ToolResult:
        """Search and format the documents; a failure is an error observation."""
        query = str(call.arguments)
        start = time.perf_counter()
        if not query:
            return ToolResult(
                "\n\n<information>[SearchTool Error: empty query; write "
                "<search> your query </search>]</information>\n\n",
                ok=False,
                info={"query": query},
            )
        try:
            docs = self.search(query)
        except Exception as e:
            return ToolResult(
                f"\n\n<information>[SearchTool Error: {e}]</information>\n\n",
                ok=False,
                info={"query": query, "error": str(e)},
            )
        text = format_documents(docs) if docs else "No documents matched the query.\n"
        text = truncate_output(text, self.max_output_chars)
        return ToolResult(
            f"\n\n<information>{text}</information>\n\n",
            info={
                "query": query,
                "num_documents": len(docs),
                "search_time": time.perf_counter() - start,
            },
        )
