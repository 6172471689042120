"""A pool of ``gemgym serve`` endpoints for trainers: the one client every remote env uses.

:class:`EndpointPool` holds the endpoints (``http://host:port`` of servers that all serve the same
env) and hands out WebSocket sessions; :class:`~gemgym.integrations.openenv.OpenEnvEnv` plays on
it (``OpenEnvEnv(["http://a:8000", "http://b:8000"])`` or ``OpenEnvEnv(pool)``), and so does
every vector backend and the episode engine, which build their envs from it.

* **Sticky sessions**: an env keeps its session, on one endpoint, from episode to episode; it
  moves only at a reset, when its endpoint holds two or more sessions more than another
  endpoint that is up (so load evens out again after an endpoint comes back).
* **A failed reset is retried on another endpoint**: a reset whose endpoint cannot be reached
  (refused, timed out, closed, full) goes to the next endpoint, least loaded first; only when
  every endpoint has failed does it raise :class:`~gemgym.errors.EnvLostError`.
* **A lost endpoint is the episode's error**: a step whose endpoint goes away mid-episode raises
  :class:`~gemgym.errors.EnvLostError` (the episode engine records stage ``"env"``): the
  episode's state lived on that server, so it cannot go on elsewhere. The endpoint is marked
  down; the next reset of that env plays on another endpoint.
* **Reconnects when it comes back**: a down endpoint is tried again (a new session) once
  ``retry_s`` seconds have passed (doubling on each failure in a row, at most ``max_retry_s``);
  when that succeeds it is up again and takes new sessions and moved ones.
* **A full server is full, not lost**: an endpoint that refuses a session because it holds its
  ``--max-sessions`` (or this client's ``--max-client-sessions`` / ``--max-client-envs``) is
  up; the reset goes to the next endpoint, the full one is tried again after the server's
  ``Retry-After`` (1 s), and when every endpoint is full the reset raises
  :class:`~gemgym.errors.ServerFullError` (an :class:`~gemgym.errors.EnvLostError`: stage
  ``"env"``) saying so.

Every endpoint must serve the same env (id and kwargs): the same seed then gives the same
episode on any of them. Copies of a pool (pickled to a worker process or a Ray actor) share one
pool per process. Needs ``pip install "gemgym[openenv]"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gemgym.errors import ConfigError, EnvLostError, ServerFullError

__all__ = ["Endpoint", "EndpointPool", "close_quietly", "describe", "is_full", "is_lost"]

_FULL_MARKERS = ("CAPACITY_REACHED", "server full", "Server full", "at capacity", "client cap")
FULL_RETRY_S = 1.0
"""Seconds before a full endpoint is asked again (``gemgym serve``'s ``Retry-After``)."""


def _full_text(text: str) -> bool:
    return any(m in text for m in _FULL_MARKERS)


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by an OpenEnv client call) is a server refusing a session over
    one of its caps ("server full", ``CAPACITY_REACHED``): the server is up, but full."""
    return isinstance(exc, RuntimeError) and _full_text(str(exc))


def is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by an OpenEnv client call) means the endpoint cannot serve the
    session (unreachable, closed, timed out, full), as opposed to an error of the env itself."""
    try:
        from websockets.exceptions import ConnectionClosed, InvalidHandshake
    except ImportError:  # pragma: no cover - websockets comes with openenv-core
        ConnectionClosed = InvalidHandshake = OSError  # type: ignore[assignment,misc]
    if isinstance(exc, ConnectionError | OSError | TimeoutError | asyncio.TimeoutError):
        return True
    if isinstance(exc, ConnectionClosed | InvalidHandshake):
        return True
    return is_full(exc)


_TOKEN_IN_URL = re.compile(r"([?&]token=)[^&\s'\"]+")


def _unauthorized(exc: BaseException) -> bool:
    """Whether a server refused the session for its token (HTTP 401 on the handshake)."""
    return any("HTTP 401" in str(e) for e in (exc, exc.__cause__) if e is not None)


def describe(exc: BaseException) -> str:
    """``Name: first line of the message`` (at most 200 characters; a token in a URL shown as
    ``token=***``)."""
    text = _TOKEN_IN_URL.sub(r"\1***", str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


@dataclass
class Endpoint:
    """One server of a pool and what the pool knows about it.

    Attributes:
        url: the server (``http://host:port``).
        sessions: sessions open on it from this process.
        down_until: ``time.monotonic()`` before which it is not tried again (0: up).
        failures: failures in a row (the retry delay doubles with each).
        error: the last failure, while it is down (or full).
        full: its last answer refused a session over one of its caps (it is up).
    """

    url: str
    sessions: int = 0
    down_until: float = 0.0
    failures: int = 0
    error: str | None = None
    full: bool = False

    @property
    def up(self) -> bool:
        """Whether the last try on it succeeded."""
        return self.failures == 0


_POOLS: weakref.WeakValueDictionary[str, EndpointPool] = weakref.WeakValueDictionary()
_POOLS_LOCK = threading.RLock()  # _shared holds it while EndpointPool() registers


def _shared(name: str, urls: tuple[str, ...], settings: dict[str, Any]) -> EndpointPool:
    """The process's pool named ``name`` (made on first use): how a pickled pool comes back."""
    with _POOLS_LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = EndpointPool(urls, **settings)
            pool.name = name
            _POOLS[name] = pool
        return pool


class EndpointPool:
    """A pool of ``gemgym serve`` endpoints that hands out sessions (see the module docstring).

    Args:
        urls: the servers (``http(s)://`` or ``ws(s)://``), all serving the same env.
        retry_s: seconds before a down endpoint is tried again (doubling with each failure in a
            row, up to ``max_retry_s``).
        connect_timeout_s: how long opening a session may take.
        message_timeout_s: how long a reply may take before its endpoint counts as lost.
        token: the servers' bearer token (``gemgym serve --token``; default
            ``$GEMGYM_SERVE_TOKEN``), sent with each new session.
    """

    def __init__(
        self,
        urls: str | Iterable[str],
        *,
        retry_s: float = 2.0,
        max_retry_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        token: str | None = None,
    ) -> None:
        found = (urls,) if isinstance(urls, str) else tuple(urls)
        if not found:
            raise ConfigError("an endpoint pool needs at least one server URL")
        for url in found:
            if not isinstance(url, str) or not url.startswith(
                ("http://", "https://", "ws://", "wss://")
            ):
                raise ConfigError(
                    f"base_url must be http(s):// or ws(s)://, got {url!r} "
                    "(e.g. http://127.0.0.1:8000, where `gemgym serve ENV_ID` listens)"
                )
        if len(set(found)) != len(found):
            raise ConfigError(f"an endpoint is listed twice in {list(found)}")
        if retry_s <= 0 or max_retry_s < retry_s:
            raise ConfigError("retry_s must be > 0 and max_retry_s at least retry_s")
        self.urls = found
        self.retry_s = float(retry_s)
        self.max_retry_s = float(max_retry_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.message_timeout_s = float(message_timeout_s)
        self.token = token if token is not None else os.environ.get("GEMGYM_SERVE_TOKEN") or None
        self.name = uuid.uuid4().hex
        self.endpoints = [Endpoint(url) for url in found]
        self._lock = threading.Lock()
        with _POOLS_LOCK:
            _POOLS[self.name] = self

    def _settings(self) -> dict[str, Any]:
        return {
            "retry_s": self.retry_s,
            "max_retry_s": self.max_retry_s,
            "connect_timeout_s": self.connect_timeout_s,
            "message_timeout_s": self.message_timeout_s,
            "token": self.token,
        }

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies in one process share one pool (its sessions and what it knows of each
        endpoint)."""
        return (_shared, (self.name, self.urls, self._settings()))

    def __repr__(self) -> str:
        state = ", ".join(
            f"{e.url} ({e.sessions} sessions{'' if e.up else ', down'})" for e in self.endpoints
        )
        return f"EndpointPool({state})"

    # -- bookkeeping ------------------------------------------------------------------------------
    def _candidates(self, exclude: Sequence[Endpoint], now: float) -> list[Endpoint]:
        """Endpoints to try, best first: up (or due for a retry) and least loaded, then the
        ones still waiting out their retry delay (soonest first: better than giving up)."""
        ready = [e for e in self.endpoints if e not in exclude and e.down_until <= now]
        waiting = [e for e in self.endpoints if e not in exclude and e.down_until > now]
        ready.sort(key=lambda e: (e.sessions, self.endpoints.index(e)))
        waiting.sort(key=lambda e: e.down_until)
        return ready + waiting

    def mark_lost(self, endpoint: Endpoint, error: BaseException | str) -> None:
        """Record that ``endpoint`` failed: it is not tried again for a while (a full one for
        :data:`FULL_RETRY_S`, a lost one for the retry delay)."""
        full = is_full(error) if isinstance(error, BaseException) else _full_text(error)
        with self._lock:
            endpoint.full = full
            if full:  # up, but full: asked again once the server's Retry-After has passed
                endpoint.down_until = time.monotonic() + FULL_RETRY_S
                endpoint.error = error if isinstance(error, str) else describe(error)
                return
            endpoint.failures += 1
            delay = min(self.max_retry_s, self.retry_s * 2 ** (endpoint.failures - 1))
            endpoint.down_until = time.monotonic() + delay
            endpoint.error = error if isinstance(error, str) else describe(error)

    def _mark_up(self, endpoint: Endpoint) -> None:
        with self._lock:
            endpoint.failures = 0
            endpoint.down_until = 0.0
            endpoint.error = None
            endpoint.full = False

    def endpoint_error(self, endpoint: Endpoint) -> str:
        """Why ``endpoint`` was last marked down."""
        with self._lock:
            return endpoint.error or "down"

    def release(self, endpoint: Endpoint) -> None:
        """A session on ``endpoint`` was closed."""
        with self._lock:
            endpoint.sessions = max(0, endpoint.sessions - 1)

    def should_move(self, endpoint: Endpoint) -> bool:
        """Whether a session on ``endpoint`` had better move (at a reset): another endpoint,
        up or due for a retry, holds two or more sessions fewer."""
        now = time.monotonic()
        with self._lock:
            others = [
                e.sessions for e in self.endpoints if e is not endpoint and e.down_until <= now
            ]
            return bool(others) and min(others) + 2 <= endpoint.sessions

    # -- sessions ---------------------------------------------------------------------------------
    def _connect(self, endpoint: Endpoint) -> Any:
        from openenv.core.generic_client import GenericEnvClient

        client = GenericEnvClient(
            endpoint.url,
            connect_timeout_s=self.connect_timeout_s,
            message_timeout_s=self.message_timeout_s,
        )
        if self.token is not None:  # OpenEnv's client sets no headers: the query form
            client._ws_url = f"{client._ws_url}?token={quote(self.token, safe='')}"
        client = client.sync()
        try:
            client.connect()
        except BaseException:
            close_quietly(client)
            raise
        return client

    def open(
        self,
        exclude: Sequence[Endpoint] = (),
        *,
        ready_only: bool = False,
        errors: list[str] | None = None,
    ) -> Any:
        """A new session: ``(endpoint, sync client)`` on the best endpoint not in ``exclude``
        (each failing one is marked down and the next tried). ``ready_only``: skip endpoints
        still waiting out their retry delay (returns ``None`` when no other one answers).
        ``errors`` collects each failure (and the ones before, for the final message)."""
        tried = list(exclude)
        errors = [] if errors is None else errors
        while True:
            with self._lock:
                now = time.monotonic()
                candidates = self._candidates(tried, now)
                if ready_only:
                    candidates = [e for e in candidates if e.down_until <= now]
                if not candidates:
                    break
                endpoint = candidates[0]
                endpoint.sessions += 1  # reserved now, so that concurrent opens spread
            tried.append(endpoint)
            try:
                client = self._connect(endpoint)
            except Exception as e:
                self.release(endpoint)
                if _unauthorized(e):
                    raise ConfigError(
                        f"{endpoint.url} refused this client (HTTP 401: "
                        f"{'no token sent' if self.token is None else 'not its token'}); pass "
                        "the server's --token as token= (OpenEnvEnv(url, token=...), "
                        "EndpointPool(urls, token=...)) or set GEMGYM_SERVE_TOKEN"
                    ) from None
                if not is_lost(e):
                    raise
                self.mark_lost(endpoint, e)
                errors.append(f"{endpoint.url}: {describe(e)}")
                continue
            self._mark_up(endpoint)
            return endpoint, client
        if ready_only:
            return None
        raise self.none_up(errors)

    def none_up(self, errors: Sequence[str] = ()) -> EnvLostError:
        """The error when no endpoint could take a session: :class:`ServerFullError` when
        every one refused it for being full."""
        listed = "; ".join(errors) or "; ".join(
            f"{e.url}: {e.error or 'not tried'}" for e in self.endpoints
        )
        if errors and all(_full_text(e) for e in errors):
            return ServerFullError(
                f"every server of the pool is full ({listed}); close the envs you no longer "
                "play, play fewer at once (the engine's concurrency, the number of envs), or add "
                "servers (or start them with a larger --max-sessions); a full server is asked "
                f"again after {FULL_RETRY_S:g} s"
            )
        return EnvLostError(
            f"no endpoint of the pool could take a session ({listed}); start the servers "
            "(`gemgym serve ENV_ID --port PORT`) or check them: a down endpoint is tried again "
            f"after {self.retry_s:g} s (doubling, up to {self.max_retry_s:g} s)"
        )

    def status(self) -> list[dict[str, Any]]:
        """Each endpoint: ``url``, ``up``, ``full``, ``sessions``, ``error``."""
        with self._lock:
            return [
                {"url": e.url, "up": e.up, "full": e.full, "sessions": e.sessions, "error": e.error}
                for e in self.endpoints
            ]


def close_quietly(client: Any) -> None:
    """Close a sync OpenEnv client whose server may be gone (never raises)."""
    with contextlib.suppress(Exception):  # the server is gone: nothing to tell it
        client.close()
