"""An HTTP retrieval server speaking the Search-R1 / GEM retrieval protocol.

Trainers run one server and point every env's :class:`~gemgym.tools.search.SearchTool` at it,
so many envs share one index. Start it with ``gemgym serve-retriever --corpus docs.jsonl`` or
in Python with :class:`RetrievalServer`.

Protocol
--------
``POST /retrieve`` with a JSON body (or MessagePack, as GEM's ``SearchTool`` sends, when the
``msgpack`` package is installed)::

    {"queries": ["what is a heap?", ...], "topk": 3, "return_scores": true}

``topk`` defaults to the server's ``--topk``. The answer, in the request's encoding::

    {"result": [[{"document": {"id": ..., "title": ..., "text": ..., "contents": ...},
                  "score": 7.76}, ...], ...]}

one list per query, best first; with ``"return_scores": false`` each list holds the documents
themselves, as Search-R1's server does. ``contents`` is ``title + "\\n" + text``, Search-R1's
wiki-18 layout.

GEM's single-query request ``{"query": "one query", "topk": 3, "return_scores": true}`` (what
GEM's own ``SearchTool`` posts) gets GEM's server's answer: one flat list,
``{"result": [{"document": {...}, "score": 7.76}, ...]}`` (``"score": null`` without
``return_scores``). ``GET /health`` answers ``{"status": "ok", "documents": N, "backend": ...}``.
Bad requests get status 400 and ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from gemgym.errors import ConfigError
from gemgym.retrieval.index import Retriever

__all__ = ["MAX_TOPK", "RetrievalServer", "handle_retrieve"]

MAX_TOPK = 100
"""The largest ``topk`` a request may ask for."""

MAX_QUERIES = 1024
"""The most queries one request may carry."""

_NOT_JSON = object()
_MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")


class BadRequest(ValueError):
    """A request the server answers with status 400."""


def handle_retrieve(retriever: Retriever, request: Any, default_topk: int) -> dict[str, Any]:
    """Answer one decoded ``/retrieve`` request (the protocol, without HTTP)."""
    if not isinstance(request, dict):
        raise BadRequest("the body must be an object with 'queries' (a list of strings)")
    single = "queries" not in request and "query" in request  # GEM's request: a flat answer
    if "queries" in request:
        queries = request["queries"]
    elif single:
        queries = [request["query"]]
        if not isinstance(queries[0], str):
            raise BadRequest("'query' must be a string")
    else:
        raise BadRequest("missing 'queries' (a list of strings)")
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest("'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise BadRequest(f"at most {MAX_QUERIES} queries per request, got {len(queries)}")
    topk = request.get("topk") or default_topk
    if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
        raise BadRequest(f"'topk' must be an int from 1 to {MAX_TOPK}, got {topk!r}")
    with_scores = bool(request.get("return_scores", False))
    results = retriever.batch_search(queries, topk)
    if single:
        return {
            "result": [
                {"document": h.document.to_dict(), "score": h.score if with_scores else None}
                for h in results[0]
            ]
        }
    if with_scores:
        return {
            "result": [
                [{"document": h.document.to_dict(), "score": h.score} for h in hits]
                for hits in results
            ]
        }
    return {"result": [[h.document.to_dict() for h in hits] for hits in results]}


def _msgpack() -> Any | None:
    try:
        import msgpack  # type: ignore[import-untyped]
    except ImportError:
        return None
    return msgpack


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log is not None:
            self.server.log(f"{self.address_string()} {format % args}")

    def _send(self, status: int, payload: dict[str, Any], msgpack: bool = False) -> None:
        packer = _msgpack() if msgpack else None
        if packer is not None:
            body, ctype = packer.packb(payload), "application/msgpack"
        else:
            body, ctype = json.dumps(payload).encode("utf-8"), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/health", ""):
            self._send(
                HTTPStatus.OK,
                {
                    "status": "ok",
                    "documents": len(self.server.retriever),
                    "backend": self.server.retriever.backend,
                },
            )
        else:
            self._send(HTTPStatus.NOT_FOUND, {"error": f"no such path {self.path!r}"})

    def do_POST(self) -> None:
        if self.path.split("?")[0].rstrip("/") not in ("/retrieve", "/search", ""):
            self._send(
                HTTPStatus.NOT_FOUND, {"error": f"no such path {self.path!r}; POST /retrieve"}
            )
            return
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        use_msgpack = ctype in _MSGPACK_TYPES
        try:
            request = self._decode(raw, use_msgpack)
            if request is _NOT_JSON:
                use_msgpack = True
                request = self._decode(raw, True)
            answer = handle_retrieve(self.server.retriever, request, self.server.topk)
        except BadRequest as e:
            self._send(HTTPStatus.BAD_REQUEST, {"error": str(e)}, use_msgpack)
            return
        except Exception as e:  # a broken index must not kill the server thread
            self._send(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(e).__name__}: {e}"}, use_msgpack
            )
            return
        self._send(HTTPStatus.OK, answer, use_msgpack)

    @staticmethod
    def _decode(raw: bytes, as_msgpack: bool) -> Any:
        if as_msgpack:
            packer = _msgpack()
            if packer is None:
                raise BadRequest("MessagePack bodies need the 'msgpack' package; send JSON")
            try:
                return packer.unpackb(raw, raw=False)
            except Exception as e:
                raise BadRequest(f"the body is neither JSON nor MessagePack: {e}") from e
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if _msgpack() is None:
                raise BadRequest(f"the body is not valid JSON: {e}") from e
            return _NOT_JSON


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        retriever: Retriever,
        topk: int,
        log: Callable[[str], None] | None,
    ) -> None:
        self.retriever = retriever
        self.topk = topk
        self.log = log
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (timed out) is not worth a traceback on stderr."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return
        super().handle_error(request, client_address)


class RetrievalServer:
    """Serve a :class:`~gemgym.retrieval.index.Retriever` over HTTP.

    Args:
        retriever: the index to serve.
        host: the address to bind (``127.0.0.1`` by default: loopback only).
        port: the port; ``0`` picks a free one (read it back from :attr:`port`).
        topk: results per query when a request does not say.
        log: called with one line per request (``None``: silent).

    Use :meth:`serve_forever` in the foreground, or :meth:`start` / :meth:`stop` (or a
    ``with`` block) to run it in a background thread::

        with RetrievalServer(BM25Retriever(load_corpus("docs.jsonl"))) as server:
            tool = SearchTool(url=server.url)
    """

    def __init__(
        self,
        retriever: Retriever,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        topk: int = 3,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
            raise ConfigError(f"topk must be an int from 1 to {MAX_TOPK}, got {topk!r}")
        try:
            self._httpd = _HTTPServer((host, port), retriever, topk, log)
        except OSError as e:
            raise ConfigError(f"cannot listen on {host}:{port}: {e}") from e
        self.retriever = retriever
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        """The bound address."""
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The URL to give :class:`~gemgym.tools.search.SearchTool` (``.../retrieve``)."""
        return f"http://{self.host}:{self.port}/retrieve"

    def serve_forever(self) -> None:
        """Answer requests until :meth:`stop` is called (from another thread) or Ctrl-C."""
        try:
            self._httpd.serve_forever(poll_interval=0.2)
        finally:
            self._httpd.server_close()

    def start(self) -> RetrievalServer:
        """Serve in a daemon thread; returns ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
