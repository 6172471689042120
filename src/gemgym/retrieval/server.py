"""An HTTP retrieval server speaking the Search-R1 / GEM retrieval protocol.

Trainers run one server and point every env's :class:`~gemgym.tools.search.SearchTool` at it,
so many envs share one index. Start it with ``gemgym serve-retriever --corpus docs.jsonl`` or
in Python with :class:`RetrievalServer`.

Protocol
--------
``POST /retrieve`` with a JSON body (or MessagePack, as GEM's ``SearchTool`` sends, when the
``msgpack`` package is installed)::

    {"queries": ["what is a heap?", ...], "topk": 3, "return_scores": true}

``topk`` defaults to the server's ``--topk``. The answer, in the request's encoding (or the
one ``Accept`` names)::

    {"result": [[{"document": {"id": ..., "title": ..., "text": ..., "contents": ...},
                  "score": 7.76}, ...], ...]}

one list per query, best first; with ``"return_scores": false`` each list holds the documents
themselves, as Search-R1's server does. ``contents`` is ``title + "\\n" + text``, Search-R1's
wiki-18 layout.

GEM's single-query request ``{"query": "one query", "topk": 3, "return_scores": true}`` (what
GEM's own ``SearchTool`` posts) gets GEM's server's answer: one flat list,
``{"result": [{"document": {...}, "score": 7.76}, ...]}`` (``"score": null`` without
``return_scores``). ``GET /health`` answers ``{"status": "ok", "documents": N, "backend": ...}``
and ``GET /metrics`` Prometheus metrics (requests, queries, latency, rejections).

Bad requests get a 4xx status and ``{"error": "..."}``: in MessagePack only for a client that
sent or accepts MessagePack, in JSON otherwise. The server runs on gemgym's server stack
(:mod:`gemgym.serving`: uvicorn; ``pip install "gemgym[serve]"``) with its limits: an optional
bearer token (required off loopback), bodies up to 8 MiB, JSON nested at most 64 deep, idle
connections closed; searches run on ``threads`` threads with at most ``max_pending`` requests
waiting or running (503 with ``Retry-After`` beyond) and ``max_client_pending`` of them from one
client (429).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gemgym.errors import ConfigError
from gemgym.retrieval.index import Retriever
from gemgym.serving import Limits, resolve_token

if TYPE_CHECKING:
    from gemgym.serving.stack import Receive, Runner, Scope, Send

__all__ = ["MAX_TOPK", "RetrievalServer", "handle_retrieve"]

MAX_TOPK = 100
"""The largest ``topk`` a request may ask for."""

MAX_QUERIES = 1024
"""The most queries one request may carry."""

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


def _media(value: str | None) -> set[str]:
    if not value:
        return set()
    return {part.split(";")[0].strip().lower() for part in value.split(",")}


class _RetrievalApp:
    """The ASGI app: routes, content negotiation, and the bounded search pool."""

    def __init__(
        self,
        retriever: Retriever,
        topk: int,
        limits: Limits,
        threads: int,
        max_pending: int,
        max_client_pending: int,
        log: Callable[[str], None] | None,
    ) -> None:
        from gemgym.serving.stack import Metrics

        self.retriever = retriever
        self.topk = topk
        self.limits = limits
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="gemgym-retrieve")
        self.max_pending = max_pending
        self.max_client_pending = max_client_pending
        self.pending = 0
        self.client_pending: Counter[str] = Counter()
        self.log = log
        self.metrics = Metrics(
            "gemgym_retriever",
            histogram="request_latency",
            help_histogram="Seconds a /retrieve request took on the server",
            rate_of="queries",
        )
        m = self.metrics
        m.describe("requests", "/retrieve requests answered, by status")
        m.describe("queries", "Queries searched")
        m.describe("rejections", "Requests refused, by reason")
        m.describe("errors", "Requests that failed inside the server (500)")
        m.gauge("pending", "Requests searching or waiting now", lambda: [({}, self.pending)])
        m.gauge("documents", "Documents in the index", lambda: [({}, len(retriever))])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from gemgym.serving.stack import HTTPError, send_bytes, send_json

        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    self.pool.shutdown(wait=False, cancel_futures=True)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1008, "reason": "POST /retrieve"})
            return
        path = scope["path"].rstrip("/") or "/"
        method = scope["method"]
        if method in ("GET", "HEAD"):
            if path in ("/health", "/"):
                health = {
                    "status": "ok",
                    "documents": len(self.retriever),
                    "backend": self.retriever.backend,
                }
                await send_json(send, 200, health)
            elif path == "/metrics":
                body = self.metrics.render().encode("utf-8")
                await send_bytes(send, 200, body, "text/plain; version=0.0.4; charset=utf-8")
            else:
                raise HTTPError(404, f"no such path {scope['path']!r}; POST /retrieve")
            return
        if method != "POST":
            raise HTTPError(405, f"{method} is not served; POST /retrieve")
        if path not in ("/retrieve", "/search", "/"):
            raise HTTPError(404, f"no such path {scope['path']!r}; POST /retrieve")
        t0 = time.perf_counter()
        body = (await receive()).get("body", b"")
        status, payload, packed = await self._retrieve(scope, body)
        if packed:
            packer = _msgpack()
            assert packer is not None
            await send_bytes(send, status, packer.packb(payload), "application/msgpack")
        else:
            await send_json(send, status, payload, self._retry(status))
        self.metrics.inc("requests", code=str(status))
        self.metrics.observe(time.perf_counter() - t0)
        if self.log is not None:
            client = scope.get("client") or ("-", 0)
            ms = (time.perf_counter() - t0) * 1000
            self.log(f"{client[0]} POST {scope['path']} {status} {ms:.1f} ms")

    @staticmethod
    def _retry(status: int) -> list[tuple[str, str]]:
        return [("retry-after", "1")] if status in (429, 503) else []

    async def _retrieve(self, scope: Scope, body: bytes) -> tuple[int, dict[str, Any], bool]:
        """(status, answer, whether in MessagePack)."""
        from gemgym.serving.stack import HTTPError, client_of, decode_json, header

        sent = _media(header(scope, b"content-type"))
        accepts = _media(header(scope, b"accept"))
        says_msgpack = bool(sent & set(_MSGPACK_TYPES))
        wants_msgpack = bool(accepts & set(_MSGPACK_TYPES)) or (
            says_msgpack and not accepts & {"application/json"}
        )
        packer = _msgpack()
        if (says_msgpack or wants_msgpack) and packer is None:
            return (
                415,
                {"error": "MessagePack needs the 'msgpack' package on the server; send JSON"},
                False,
            )
        try:
            if says_msgpack:
                request = self._unpack(body)
            else:
                try:
                    request = decode_json(body, self.limits.max_json_depth)
                except HTTPError as e:
                    sniffed = None
                    if packer is not None and not sent & {"application/json"} and body:
                        try:
                            sniffed = self._unpack(body)
                        except HTTPError:
                            sniffed = None
                    if sniffed is None:
                        raise HTTPError(400, e.message) from None
                    request = sniffed
                    wants_msgpack = wants_msgpack or not accepts & {"application/json"}
        except HTTPError as e:
            self.metrics.inc("rejections", reason="bad_request")
            return e.status, {"error": e.message}, wants_msgpack and packer is not None
        client = client_of(scope)
        if self.pending >= self.max_pending:
            self.metrics.inc("rejections", reason="server_full")
            message = (
                f"server busy: {self.pending} requests searching or waiting (at most "
                f"{self.max_pending}); retry in 1 s"
            )
            return 503, {"error": message}, wants_msgpack
        if self.client_pending[client] >= self.max_client_pending:
            self.metrics.inc("rejections", reason="client_cap")
            message = (
                f"too many requests at once from {client}: {self.client_pending[client]} of "
                f"{self.max_client_pending}; wait for an answer before sending more"
            )
            return 429, {"error": message}, wants_msgpack
        self.pending += 1
        self.client_pending[client] += 1
        try:
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(
                self.pool, handle_retrieve, self.retriever, request, self.topk
            )
        except BadRequest as e:
            self.metrics.inc("rejections", reason="bad_request")
            return 400, {"error": str(e)}, wants_msgpack
        except Exception as e:  # a broken index answers 500, the server goes on
            self.metrics.inc("errors")
            return 500, {"error": f"{type(e).__name__}: {e}"}, wants_msgpack
        finally:
            self.pending -= 1
            self.client_pending[client] -= 1
            if self.client_pending[client] <= 0:
                del self.client_pending[client]
        self.metrics.inc(
            "queries",
            len(answer["result"]) if isinstance(request, dict) and "queries" in request else 1,
        )
        return 200, answer, wants_msgpack

    def _unpack(self, raw: bytes) -> Any:
        from gemgym.serving.stack import HTTPError

        packer = _msgpack()
        assert packer is not None
        try:
            value = packer.unpackb(raw, raw=False)
        except Exception as e:
            raise HTTPError(400, f"the body is neither JSON nor MessagePack: {e}") from None
        from gemgym.serving.stack import depth_ok

        if isinstance(value, dict | list) and not depth_ok(value, self.limits.max_json_depth):
            raise HTTPError(400, f"the body nests deeper than {self.limits.max_json_depth} levels")
        return value


class RetrievalServer:
    """Serve a :class:`~gemgym.retrieval.index.Retriever` over HTTP.

    Args:
        retriever: the index to serve.
        host: the address to bind (``127.0.0.1`` by default: loopback only).
        port: the port; ``0`` picks a free one (read it back from :attr:`port`).
        topk: results per query when a request does not say.
        log: called with one line per request (``None``: silent).
        token: the bearer token clients must send (default ``$GEMGYM_SERVE_TOKEN``); needed to
            bind an address other than loopback, unless ``insecure``.
        insecure: serve a non-loopback address without a token.
        limits: body, JSON and connection limits (:class:`gemgym.serving.Limits`).
        threads: searches run at once.
        max_pending: requests searching or waiting at once (503 beyond).
        max_client_pending: of those, from one client address (429 beyond).

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
        token: str | None = None,
        insecure: bool = False,
        limits: Limits | None = None,
        threads: int = 4,
        max_pending: int = 256,
        max_client_pending: int = 64,
    ) -> None:
        if isinstance(topk, bool) or not isinstance(topk, int) or not 1 <= topk <= MAX_TOPK:
            raise ConfigError(f"topk must be an int from 1 to {MAX_TOPK}, got {topk!r}")
        for name, value in (
            ("threads", threads),
            ("max_pending", max_pending),
            ("max_client_pending", max_client_pending),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        from gemgym.serving.stack import Runner, guard

        token = resolve_token(token, host, insecure=insecure)
        self.limits = limits or Limits()
        self.retriever = retriever
        self.app = _RetrievalApp(
            retriever, topk, self.limits, threads, max_pending, max_client_pending, log
        )
        self.metrics = self.app.metrics
        self._runner: Runner = Runner(
            guard(self.app, limits=self.limits, token=token, metrics=self.metrics),
            host=host,
            port=port,
            limits=self.limits,
            log_level="warning",
        )
        self._started = False

    @property
    def host(self) -> str:
        """The bound address."""
        return str(self._runner.sock.getsockname()[0])

    @property
    def port(self) -> int:
        """The bound port."""
        return self._runner.port

    @property
    def url(self) -> str:
        """The URL to give :class:`~gemgym.tools.search.SearchTool` (``.../retrieve``)."""
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/retrieve"

    def serve_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        """Answer requests until Ctrl-C (or SIGTERM); ``on_ready`` is called once the server
        accepts connections."""
        self._runner.server.on_ready = on_ready
        self._runner.serve_forever()

    def start(self) -> RetrievalServer:
        """Serve in a daemon thread; returns ``self`` once the server answers."""
        if not self._started:
            self._started = True
            self._runner.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        self._runner.stop()

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
