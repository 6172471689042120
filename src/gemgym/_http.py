"""gemgym's one HTTP client stack: every request the package sends goes through here (aiohttp).

* :class:`AsyncClient`: kept-alive connections to one ``http(s)://`` base URL, one aiohttp
  session per event loop (made on first use in a loop, closed when that loop shuts down or by
  :meth:`AsyncClient.aclose`), a deadline per request, a connect deadline, a connection limit;
* :class:`SyncClient`: the same requests for blocking code (a tool's ``execute``, the
  :class:`~gemgym.agents.OpenAIAgent`): they run on one event loop in a daemon thread of the
  process (:func:`run_sync`), so blocking callers share the async stack and its pooling;
* :class:`TransportError`: the request got no HTTP answer (``kind``: ``"connect"``,
  ``"timeout"``, ``"broken"``); an HTTP error status is not an exception, it is
  :attr:`Response.status`, which the caller maps to :mod:`gemgym.errors` (the model is
  unavailable, the server is busy, the request was refused);
* :class:`RetryPolicy` and :data:`RETRY_STATUS`: how callers retry (exponential backoff with
  jitter) and which statuses are worth it.

A POST whose kept-alive connection the server closed meanwhile (servers drop idle connections
after a few seconds: uvicorn after 5) is sent once more on a new connection at once; every
other failure is the caller's to retry. Proxies are read from the environment
(``HTTPS_PROXY``, ``NO_PROXY``, ...), as urllib and the OpenAI SDK do, except for loopback
servers, which are always reached directly.

Why aiohttp: against a chat server that answers at once, ``gemgym eval`` played 1,130-1,220
episodes/s with it on an idle machine and 89-99 with httpx (docs/benchmarks.md, ``benchmarks/eval.py
--client aiohttp,httpx,streams``). It is imported on first use only (``import gemgym`` stays free of
it); a missing install names the extra to add (``pip install "gemgym[openai]"``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import random
import threading
import weakref
from collections.abc import AsyncIterator, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit

from gemgym.errors import ConfigError, GemGymError, missing_dependency

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "RETRY_STATUS",
    "AsyncClient",
    "Response",
    "RetryPolicy",
    "SyncClient",
    "TransportError",
    "error_detail",
    "require",
    "run_sync",
]

T = TypeVar("T")

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth retrying (the server is busy, restarting or broke on this request)."""

KEEPALIVE_S = 4.0
"""Idle connections are closed after this many seconds, before common servers close them
(uvicorn: 5 s), so a request rarely meets a connection the server has dropped."""


def require(extra: str) -> Any:
    """The ``aiohttp`` module, or :class:`~gemgym.errors.DependencyNotInstalled` naming
    ``pip install "gemgym[extra]"``."""
    try:
        import aiohttp
    except ImportError as e:
        raise missing_dependency("aiohttp", extra) from e
    return aiohttp


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed request is retried.

    Attempt ``k`` (0-based) of a retry waits ``min(max_backoff_s, backoff_s * 2**k)`` seconds
    times a random factor in ``[1 - jitter, 1]`` (so that many episodes failing at once do not
    come back at once; ``jitter=1`` is "full jitter").
    """

    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigError("backoff_s and max_backoff_s must be >= 0")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError(f"jitter must be in [0, 1], got {self.jitter}")

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before retry ``attempt`` (0-based)."""
        base = min(self.max_backoff_s, self.backoff_s * 2.0**attempt)
        return base * (1.0 - self.jitter * rng.random())


def error_detail(text: str) -> str:
    """The message of an error reply (OpenAI's ``{"error": {"message"}}``, FastAPI's
    ``{"detail"}``, SGLang's ``{"error": {...}}`` or ``{"message"}``), else the text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:500] or "(empty reply)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(err.get(key), str):
                    return str(err[key])[:500]
        elif isinstance(err, str):
            return err[:500]
        if isinstance(data.get("detail"), str):
            return str(data["detail"])[:500]
    return text.strip()[:500]


TransportKind = Literal["connect", "timeout", "broken"]


class TransportError(GemGymError, ConnectionError):
    """A request got no HTTP answer.

    Attributes:
        kind: ``"connect"``: no connection (refused, no such host, or none within the connect
            deadline: ``seconds`` is then that deadline); ``"timeout"``: connected, but the
            whole answer did not come within ``seconds``; ``"broken"``: the connection broke
            mid-answer, or the answer was not HTTP.
        url: where the request went.
        detail: what the network layer said.
        seconds: the deadline that passed (``None`` unless one did).
    """

    def __init__(
        self, kind: TransportKind, url: str, detail: str, seconds: float | None = None
    ) -> None:
        self.kind: TransportKind = kind
        self.url = url
        self.detail = detail
        self.seconds = seconds
        if kind == "connect" and seconds is not None:
            message = (
                f"cannot connect to {url}: no connection within {seconds:g} s (is the server "
                "running and reachable?)"
            )
        elif kind == "connect":
            message = f"cannot connect to {url}: {detail} (is the server running? start it, or fix the URL)"
        elif kind == "timeout":
            message = (
                f"the server at {url} did not answer within {seconds:g} s (it is reachable but "
                "slow or stuck: raise the timeout if it is only slow)"
            )
        else:
            message = f"the request to {url} failed mid-answer: {detail}"
        super().__init__(message)


@dataclass(frozen=True)
class Response:
    """An HTTP answer: its status and body (any status; the caller decides what is an error),
    and the URL that gave it (after redirects, which are followed)."""

    status: int
    body: bytes
    url: str

    @property
    def text(self) -> str:
        """The body as text (UTF-8; bad bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON (raises ``ValueError`` when it is not)."""
        return json.loads(self.body)


async def _close_at_loop_end(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Hold ``session`` open until its event loop shuts its async generators down (as
    ``asyncio.run`` does at its end), then close it."""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            await session.close()


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``/``HTTPS_PROXY``, unless
    ``NO_PROXY`` covers its host), read once per client as urllib reads it per request."""
    import urllib.request

    parts = urlsplit(url)
    if parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return None  # a server on this machine is never reached through a proxy
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy:
        return None
    if urllib.request.proxy_bypass_environment(parts.netloc, proxies):  # type: ignore[attr-defined]
        return None
    return proxy


_inherited: list[Any] = []
"""What a forked child got from its parent (event loop, sessions): kept, never closed."""


def _abandon(
    session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop | None, pid: int
) -> None:
    """Close a session its client no longer uses: on its loop if that still runs, else
    forget its connections (a loop that has ended), or leave it be (the parent's, after a
    fork)."""
    if session.closed:
        return
    if pid != os.getpid():
        # the parent's session in a forked child: closing its sockets would unregister them
        # from the epoll instance the child shares with the parent (the parent's connections
        # would hang), and collecting them would warn; keep them, untouched
        _inherited.append(session)
        return
    if loop is not None and loop.is_running():
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(session.close(), loop)
            return
    connector = session.connector
    session.detach()
    if connector is not None:
        # no loop runs it: close its sockets now (the public close() would schedule a task
        # on the dead loop)
        with contextlib.suppress(Exception):
            connector._close()


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class AsyncClient:
    """Kept-alive connections to one base URL (``http(s)://host[:port][/prefix]``).

    Args:
        base_url: requests go to ``base_url + path``.
        headers: sent with every request.
        timeout: seconds a request may take, from sending to the whole answer.
        connect_timeout: seconds to get a connection (at most ``timeout``).
        max_connections: connections open at once (``0``: no limit; a request waits for a free
            one past the limit).
        extra: the extra to name when aiohttp is missing.
        name: the parameter that gave ``base_url``, named when it is not a URL.

    Requests may come from any event loop: each loop gets its own session (aiohttp's sessions
    belong to one loop), closed when that loop shuts down, so a client used under several
    ``asyncio.run`` calls needs no care; :meth:`aclose` closes the current one at once.
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_connections: int = 0,
        extra: str = "openai",
        name: str = "base_url",
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{name} must be an http(s):// URL, got {base_url!r}")
        if not timeout > 0 or not connect_timeout > 0:
            raise ConfigError(
                f"timeout and connect_timeout must be > 0, got {timeout}, {connect_timeout}"
            )
        if max_connections < 0:
            raise ConfigError(f"max_connections must be >= 0, got {max_connections}")
        self._aiohttp = require(extra)
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self.connect_timeout = float(min(connect_timeout, timeout))
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncIterator[None] | None = None
        self._pid = os.getpid()
        self._urls: dict[str, Any] = {}
        self._proxy = _env_proxy(base_url)

    def url(self, path: str = "") -> str:
        """The URL of ``path``."""
        return self.base_url + path

    # -- the session of the running loop -------------------------------------------------------
    async def _ensure(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if (
            session is not None
            and self._loop is loop
            and not session.closed
            and self._pid == os.getpid()
        ):
            return session
        self._drop()
        lib = self._aiohttp
        connector = lib.TCPConnector(
            limit=self.max_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S
        )
        new: aiohttp.ClientSession = lib.ClientSession(
            headers=self.headers,
            connector=connector,
            timeout=lib.ClientTimeout(total=None, sock_connect=self.connect_timeout),
        )
        self._session = new
        self._loop, self._pid = loop, os.getpid()
        # a client dropped without aclose() still closes its connections
        weakref.finalize(self, _abandon, new, loop, self._pid)
        self._closer = _close_at_loop_end(new)
        await self._closer.__anext__()
        return new

    def _drop(self) -> None:
        """Forget the session of another loop (or of the parent process, after a fork)."""
        session, loop = self._session, self._loop
        self._session = self._loop = self._closer = None
        if session is not None:
            _abandon(session, loop, self._pid)

    # -- requests ------------------------------------------------------------------------------
    async def request(
        self,
        method: str,
        path: str = "",
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send one request; the answer, whatever its status.

        Raises :class:`TransportError` when no answer comes (no connection, the deadline
        ``timeout`` (default: the client's) passed, the connection broke).
        """
        aiohttp = self._aiohttp
        session = await self._ensure()
        url = self._urls.get(path)
        if url is None:
            import yarl

            url = self._urls[path] = yarl.URL(self.base_url + path)
        limit = self.timeout if timeout is None else timeout
        sent_headers = dict(headers or {})
        if body is not None:
            sent_headers.setdefault("Content-Type", content_type)
        where = self.base_url + path
        try:
            async with asyncio.timeout(limit):
                for attempt in (0, 1):
                    try:
                        async with session.request(
                            method, url, data=body, headers=sent_headers, proxy=self._proxy
                        ) as r:
                            body_read = await r.read()
                            final = str(r.url) if r.history else where
                            return Response(r.status, body_read, final)
                    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as e:
                        if isinstance(e, aiohttp.ClientConnectorError) or attempt:
                            raise
                        # the server closed a kept-alive connection: once more on a new one
        except aiohttp.ServerTimeoutError as e:  # before TimeoutError: it is one
            raise TransportError("connect", where, _describe(e), self.connect_timeout) from e
        except TimeoutError as e:
            raise TransportError("timeout", where, "no answer", limit) from e
        except aiohttp.ClientConnectorError as e:
            raise TransportError("connect", where, _describe(e.os_error)) from e
        except (aiohttp.ClientError, OSError, ValueError) as e:
            raise TransportError("broken", where, _describe(e)) from e
        raise AssertionError("unreachable")  # pragma: no cover

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Response:
        """``POST base_url + path`` with ``body`` (see :meth:`request`)."""
        return await self.request("POST", path, body, content_type=content_type, timeout=timeout)

    async def post_json(self, path: str, payload: Any, *, timeout: float | None = None) -> Response:
        """``POST`` ``payload`` as JSON (see :meth:`request`)."""
        return await self.post(path, json.dumps(payload).encode(), timeout=timeout)

    async def get(self, path: str = "", *, timeout: float | None = None) -> Response:
        """``GET base_url + path`` (see :meth:`request`)."""
        return await self.request("GET", path, timeout=timeout)

    async def aclose(self) -> None:
        """Close the connections (idempotent; the client opens new ones if used again)."""
        session, loop = self._session, self._loop
        if session is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and loop is running and self._pid == os.getpid():
            self._session = self._loop = self._closer = None
            with contextlib.suppress(Exception):
                await session.close()
        else:
            self._drop()


# -- blocking callers ---------------------------------------------------------------------------
_lock = threading.Lock()
_background: tuple[int, asyncio.AbstractEventLoop, threading.Thread] | None = None
_sync_clients: weakref.WeakSet[AsyncClient] = weakref.WeakSet()


def _loop() -> asyncio.AbstractEventLoop:
    """The process's HTTP event loop (started on first use, again after a fork)."""
    global _background
    with _lock:
        if _background is None or _background[0] != os.getpid():
            if _background is not None:  # the parent's loop, after a fork: see _abandon
                _inherited.append(_background)
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="gemgym-http", daemon=True)
            thread.start()
            _background = (os.getpid(), loop, thread)
        return _background[1]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the process's HTTP event loop and wait for its result (for blocking
    callers; from a thread that runs an event loop this blocks that loop until the answer)."""
    loop = _loop()
    if asyncio._get_running_loop() is loop:
        coro.close()
        raise RuntimeError("run_sync was called from gemgym's HTTP thread; await the coroutine")
    future: Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # Ctrl-C while waiting: the request stops too
        raise


@atexit.register
def _close_background() -> None:
    """Close the blocking clients' connections and stop the HTTP thread at exit (no
    "unclosed session" warnings)."""
    background = _background
    if background is None or background[0] != os.getpid() or not background[1].is_running():
        return
    loop = background[1]

    async def close_all() -> None:
        for client in list(_sync_clients):
            await client.aclose()

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close_all(), loop).result(2.0)
    loop.call_soon_threadsafe(loop.stop)


class SyncClient:
    """:class:`AsyncClient` for blocking code: each call waits for its request, which runs on
    the process's HTTP event loop (so connections are pooled across calls and threads).
    Same arguments as :class:`AsyncClient`."""

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        self.client = AsyncClient(base_url, **kwargs)
        _sync_clients.add(self.client)

    @property
    def base_url(self) -> str:
        return self.client.base_url

    def request(
        self,
        method: str,
        path: str = "",
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """See :meth:`AsyncClient.request`."""
        return run_sync(
            self.client.request(
                method, path, body, content_type=content_type, headers=headers, timeout=timeout
            )
        )

    def post(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Response:
        """See :meth:`AsyncClient.post`."""
        return self.request("POST", path, body, content_type=content_type, timeout=timeout)

    def get(self, path: str = "", *, timeout: float | None = None) -> Response:
        """See :meth:`AsyncClient.get`."""
        return self.request("GET", path, timeout=timeout)

    def close(self) -> None:
        """Close the connections (idempotent)."""
        if self.client._session is not None:
            run_sync(self.client.aclose())
