"""The parts both gemgym servers share: the guard in front of every app (token, body limits,
errors as JSON), JSON decoding with a depth limit, Prometheus metrics, and a uvicorn runner
that binds first and reports "serving" only once the server answers.

Needs ``pip install "gemgym[serve]"`` (uvicorn and websockets).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from gemgym.errors import ConfigError, missing_dependency
from gemgym.serving import Limits

try:
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ImportError as e:  # pragma: no cover - depends on the extra
    raise missing_dependency(e.name or "uvicorn", "serve") from e

__all__ = [
    "HTTPError",
    "Metrics",
    "Runner",
    "decode_json",
    "depth_ok",
    "guard",
    "json_bytes",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("gemgym.serving")


class HTTPError(Exception):
    """A request answered with ``status`` and ``{"error": message}`` (raise it in an app)."""

    def __init__(self, status: int, message: str, *, headers: Iterable[tuple[str, str]] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = list(headers)


def _default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy numbers and arrays
        return o.tolist()
    if isinstance(o, set | frozenset):
        return sorted(o, key=str)
    return str(o)


def json_bytes(payload: Any) -> bytes:
    """``payload`` as JSON (numpy values as numbers and lists, sets sorted, anything else as its
    ``str``)."""
    return json.dumps(payload, default=_default, separators=(",", ":")).encode("utf-8")


def depth_ok(value: Any, limit: int) -> bool:
    """Whether ``value`` (decoded JSON or MessagePack) nests at most ``limit`` levels deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return True


def decode_json(raw: bytes | str, max_depth: int) -> Any:
    """The JSON value in ``raw``; :class:`HTTPError` 400 when it is not JSON or nests deeper
    than ``max_depth``."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise HTTPError(400, f"the JSON nests deeper than {max_depth} levels") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise HTTPError(400, f"the body is not valid JSON: {e}") from None
    if isinstance(value, dict | list) and not depth_ok(value, max_depth):
        raise HTTPError(400, f"the JSON nests deeper than {max_depth} levels")
    return value


# -- metrics -----------------------------------------------------------------------------------------
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def rss_bytes() -> int:
    """This process's resident memory (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * (1 << 12)
    except (OSError, ValueError, IndexError):
        return 0


class Metrics:
    """Counters, gauges and one latency histogram, rendered in Prometheus's text format.

    Updated from the event loop thread only (no locks). ``rate_of`` names a counter whose
    per-second rate over the last 10 s is also shown as ``<prefix>_<name>_per_second``.
    """

    def __init__(self, prefix: str, *, histogram: str, help_histogram: str, rate_of: str) -> None:
        self.prefix = prefix
        self.counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.help: dict[str, str] = {}
        self.gauges: dict[
            str, tuple[str, Callable[[], Iterable[tuple[dict[str, str], float]]]]
        ] = {}
        self.histogram = histogram
        self.help[histogram] = help_histogram
        self.bucket_counts = [0] * (len(_BUCKETS) + 1)
        self.hist_sum = 0.0
        self.hist_count = 0
        self.rate_of = rate_of
        self._window: list[tuple[float, float]] = []  # (second, count of rate_of in it)

    def describe(self, name: str, help_text: str) -> None:
        self.help[name] = help_text

    def inc(self, name: str, by: float = 1.0, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        self.counters[key] = self.counters.get(key, 0.0) + by
        if name == self.rate_of:
            now = float(int(time.monotonic()))
            if self._window and self._window[-1][0] == now:
                self._window[-1] = (now, self._window[-1][1] + by)
            else:
                self._window.append((now, by))
                if len(self._window) > 12:
                    del self._window[0]

    def gauge(
        self,
        name: str,
        help_text: str,
        values: Callable[[], Iterable[tuple[dict[str, str], float]]],
    ) -> None:
        self.gauges[name] = (help_text, values)

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(_BUCKETS):
            if seconds <= bound:
                self.bucket_counts[i] += 1
                break
        else:
            self.bucket_counts[-1] += 1
        self.hist_sum += seconds
        self.hist_count += 1

    def rate(self) -> float:
        """``rate_of`` per second over the last 10 whole seconds."""
        now = float(int(time.monotonic()))
        return sum(c for t, c in self._window if now - 10 <= t < now) / 10.0

    def counter(self, name: str, **labels: str) -> float:
        return self.counters.get((name, tuple(sorted(labels.items()))), 0.0)

    def render(self) -> str:
        p = self.prefix
        lines: list[str] = []
        seen: set[str] = set()
        for (name, labels), value in sorted(self.counters.items()):
            if name not in seen:
                seen.add(name)
                lines.append(f"# HELP {p}_{name}_total {self.help.get(name, name)}")
                lines.append(f"# TYPE {p}_{name}_total counter")
            lines.append(f"{p}_{name}_total{_labels(dict(labels))} {value:g}")
        for name, (help_text, values) in self.gauges.items():
            lines.append(f"# HELP {p}_{name} {help_text}")
            lines.append(f"# TYPE {p}_{name} gauge")
            lines.extend(f"{p}_{name}{_labels(lab)} {v:g}" for lab, v in values())
        rate = f"{p}_{self.rate_of}_per_second"
        lines.append(f"# HELP {rate} {self.rate_of} per second over the last 10 s")
        lines.append(f"# TYPE {rate} gauge")
        lines.append(f"{rate} {self.rate():g}")
        h = f"{p}_{self.histogram}_seconds"
        lines.append(f"# HELP {h} {self.help[self.histogram]}")
        lines.append(f"# TYPE {h} histogram")
        total = 0
        for bound, count in zip((*_BUCKETS, float("inf")), self.bucket_counts, strict=True):
            total += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            lines.append(f'{h}_bucket{{le="{le}"}} {total}')
        lines.append(f"{h}_sum {self.hist_sum:g}")
        lines.append(f"{h}_count {self.hist_count}")
        lines.append("# HELP process_resident_memory_bytes Resident memory of the server process")
        lines.append("# TYPE process_resident_memory_bytes gauge")
        lines.append(f"process_resident_memory_bytes {rss_bytes()}")
        return "\n".join(lines) + "\n"


# -- responses ---------------------------------------------------------------------------------------
async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: str = "application/json",
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    raw = [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode("latin-1")),
    ]
    raw.extend((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers)
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()
) -> None:
    await send_bytes(send, status, json_bytes(payload), headers=headers)


async def send_error(send: Send, error: HTTPError) -> None:
    await send_json(send, error.status, {"error": error.message}, error.headers)


def header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return bytes(v).decode("latin-1")
    return None


def client_of(scope: Scope) -> str:
    """Who sent a request, for per-client caps: the peer's address."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


# -- the guard -----------------------------------------------------------------------------------------
_OPEN_PATHS = frozenset({"/health", "/healthz"})


def _token_of(scope: Scope) -> str | None:
    auth = header(scope, b"authorization")
    if auth is not None:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    query = scope.get("query_string", b"")
    if query and b"token=" in query:
        values = parse_qs(bytes(query).decode("latin-1")).get("token")
        if values:
            return values[0]
    return None


def guard(app: ASGIApp, *, limits: Limits, token: str | None, metrics: Metrics) -> ASGIApp:
    """``app`` behind the checks every gemgym server makes before a request reaches it:

    * the bearer token (401 without it; a WebSocket handshake is refused with 401);
    * the request body, read here in full up to ``limits.max_body_bytes`` (413 beyond, the rest
      read and dropped so that the client gets the answer; 408 when it is too slow), then handed
      to ``app`` as one message;
    * errors: an :class:`HTTPError` becomes its status and ``{"error": ...}``; anything else a
      500 with the exception's message (never a dropped connection).
    """
    secret = token.encode("utf-8") if token is not None else None

    def authorised(scope: Scope) -> bool:
        if secret is None or scope.get("path") in _OPEN_PATHS:
            return True
        given = _token_of(scope)
        return given is not None and hmac.compare_digest(given.encode("utf-8"), secret)

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            if not authorised(scope):
                metrics.inc("rejections", reason="auth")
                await _deny_websocket(scope, receive, send)
                return
            await app(scope, receive, send)
            return
        if kind != "http":
            await app(scope, receive, send)  # lifespan
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            if not authorised(scope):
                metrics.inc("rejections", reason="auth")
                raise HTTPError(
                    401,
                    "this server needs a token: send 'Authorization: Bearer TOKEN' (the token "
                    "the server was started with, --token or GEMGYM_SERVE_TOKEN)",
                    headers=[("www-authenticate", "Bearer")],
                )
            body = await _read_body(scope, receive, limits, metrics)
            delivered = False

            async def replay() -> Message:
                nonlocal delivered
                if not delivered:
                    delivered = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await app(scope, replay, tracking_send)
        except HTTPError as e:
            if e.status != 401 and e.status < 500:
                metrics.inc("rejections", reason=_REASONS.get(e.status, "bad_request"))
            if not started:
                await send_error(send, e)
        except Exception as e:
            log.exception("error answering %s %s", scope.get("method"), scope.get("path"))
            metrics.inc("errors")
            if not started:
                await send_error(send, HTTPError(500, f"internal error: {type(e).__name__}: {e}"))

    return guarded


_REASONS = {
    400: "bad_request",
    404: "not_found",
    405: "bad_request",
    408: "timeout",
    409: "bad_request",
    413: "too_large",
    422: "bad_request",
    429: "client_cap",
    503: "server_full",
}


async def _read_body(scope: Scope, receive: Receive, limits: Limits, metrics: Metrics) -> bytes:
    if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
        return b""
    limit = limits.max_body_bytes
    declared = header(scope, b"content-length")
    too_large = HTTPError(
        413,
        f"the request body is larger than this server takes ({limit} bytes); send less per request",
        headers=[("connection", "close")],
    )
    if declared is not None and declared.isdigit() and int(declared) > 64 * limit:
        raise too_large  # not worth reading: answered at once, the connection then closes
    chunks: list[bytes] = []
    size = 0
    over = False
    deadline = time.monotonic() + limits.body_timeout_s
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise HTTPError(
                408,
                f"the request body did not arrive within {limits.body_timeout_s:g} s",
                headers=[("connection", "close")],
            ) from None
        if message["type"] == "http.disconnect":
            raise HTTPError(400, "the client went away before sending the whole body")
        piece = message.get("body", b"")
        size += len(piece)
        if size > limit:
            over = True  # read on and drop, so the client reads the 413 (no reset mid-send)
            chunks.clear()
        elif piece:
            chunks.append(piece)
        if not message.get("more_body", False):
            break
    if over:
        raise too_large
    return b"".join(chunks)


async def _deny_websocket(scope: Scope, receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    body = json_bytes(
        {
            "error": "this server needs a token: send 'Authorization: Bearer TOKEN' with the "
            "WebSocket handshake"
        }
    )
    if "websocket.http.response" in scope.get("extensions", {}):
        await send(
            {
                "type": "websocket.http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
    else:  # pragma: no cover - servers without the denial extension answer 403
        await send({"type": "websocket.close", "code": 1008, "reason": "unauthorised"})


# -- uvicorn --------------------------------------------------------------------------------------------
async def _server_full(scope: Any, receive: Any, send: Any) -> None:
    """The answer to a request over ``Limits.max_connections``: 503 with ``Retry-After``
    (uvicorn's own is plain text without it), and the connection closed."""
    await send_json(
        send,
        503,
        {"error": "server full: too many open connections; retry in 1 s", "retry_after_s": 1},
        [("retry-after", "1"), ("connection", "close")],
    )


class _TimedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection that sends no whole request head
    within the keep-alive timeout (``Limits.header_timeout_s``; on connect and after each
    answer): idle or slowly trickling connections cannot pile up. Over the connection limit
    (``Limits.max_connections``) a request is answered 503 with ``Retry-After``."""

    _deadline: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn answers over its limit_concurrency with its own 503; this class does it
        self._cap = self.limit_concurrency
        self.limit_concurrency = None

    @property
    def app(self) -> Any:
        """The app that answers the request being read: the server's, or ``_server_full``."""
        cap = self._cap
        if cap is not None and (len(self.connections) >= cap or len(self.tasks) >= cap):
            return _server_full
        return self._app

    @app.setter
    def app(self, value: Any) -> None:
        self._app = value

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.timeout_keep_alive, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        cycle = self.cycle
        if self._deadline is not None and cycle is not None and not cycle.response_complete:
            self._disarm()  # a request is being answered

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._disarm()  # the WebSocket protocol takes the connection over
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; :class:`ConfigError` saying why not."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"the port must be from 0 to 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e}") from None
    family, _, _, _, address = infos[0]
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the listening
    # socket's protocol says TCP; with Nagle on, a kept-alive client waits ~40 ms per response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        hint = "; another server is on that port: pick another port" if e.errno == 98 else ""
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}{hint}") from None
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, calling ``on_ready`` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None) -> None:
        super().__init__(config)
        self.on_ready = on_ready
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.ready.set()
            if self.on_ready is not None:
                self.on_ready()


class Runner:
    """An ASGI app served by uvicorn on a socket bound when this is built (so a busy port
    fails here, before anything says "serving").

    :meth:`serve_forever` runs in the foreground until Ctrl-C; :meth:`start` / :meth:`stop` in
    a daemon thread. ``on_ready`` is called once the server accepts connections.
    """

    def __init__(
        self,
        app: ASGIApp | str,
        *,
        host: str,
        port: int,
        limits: Limits,
        log_level: str = "warning",
        on_ready: Callable[[], None] | None = None,
        workers: int = 1,
        factory: bool = False,
    ) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.sock = bind(host, port)
        self.host = host
        self.port = int(self.sock.getsockname()[1])
        self.workers = workers
        self.config = uvicorn.Config(
            app,
            factory=factory,
            log_level=log_level,
            http=_TimedH11,
            ws="websockets-sansio",
            ws_max_size=limits.max_message_bytes,
            ws_max_queue=4,
            ws_ping_interval=20.0,
            ws_ping_timeout=20.0,
            ws_per_message_deflate=False,
            limit_concurrency=limits.max_connections,
            timeout_keep_alive=limits.header_timeout_s,  # type: ignore[arg-type]  # a float works
            timeout_graceful_shutdown=5,
            server_header=False,
            proxy_headers=False,
            lifespan="on",
            workers=workers,
        )
        self.server = _Server(self.config, on_ready)
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Serve until interrupted (SIGINT/SIGTERM); with ``workers`` > 1, as that many
        processes sharing the socket."""
        try:
            if self.workers == 1:
                self.server.run(sockets=[self.sock])
            else:
                from uvicorn.supervisors import Multiprocess

                if self.server.on_ready is not None:
                    self.server.on_ready()
                Multiprocess(self.config, sockets=[self.sock]).run()
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it stopped on: a clean stop
            pass
        finally:
            self.sock.close()

    def start(self, timeout_s: float = 30.0) -> Runner:
        """Serve in a daemon thread; returns once the server accepts connections."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])),
                name="gemgym-server",
                daemon=True,
            )
            self._thread.start()
            if not self.server.ready.wait(timeout_s):
                raise ConfigError(f"the server did not start within {timeout_s:g} s")
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._thread is not None:
            self.server.should_exit = True
            self._thread.join(30)
            self._thread = None
        self.sock.close()
