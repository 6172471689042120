"""The server stack of gemgym's network services: ``gemgym serve`` and ``gemgym serve-retriever``.

Both run on one stack (uvicorn, plain ASGI apps, no web framework) with the same protections:

* **authentication**: an optional bearer token (``--token`` or ``GEMGYM_SERVE_TOKEN``); sent as
  ``Authorization: Bearer TOKEN`` (or ``?token=TOKEN`` for clients that cannot set headers).
  Without one a server binds only a loopback address, unless told ``--insecure``.
* **limits**: request bodies (413), WebSocket messages (close 1009), JSON nesting (400);
  connections that send no request within ``header_timeout_s`` are closed.
* **sessions**: idle sessions of every kind (WebSocket, MCP over HTTP) are closed after
  ``idle_timeout_s`` (:data:`DEFAULT_IDLE_TIMEOUT_S`); caps per server and per client.
* **back-pressure**: a full server answers 503 with ``Retry-After`` (a WebSocket gets an error
  saying "server full" and a close with code 1013), never an unbounded queue.
* **observability**: ``GET /health`` (no token needed) and ``GET /metrics`` (Prometheus text).

Every bad request gets a 4xx status and a JSON body ``{"error": "..."}`` that says what to do.
This package imports nothing heavy; the servers need ``pip install "gemgym[serve]"``. See
docs/serving.md.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

from gemgym.errors import ConfigError

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "TOKEN_VAR",
    "Limits",
    "is_loopback",
    "resolve_token",
]

TOKEN_VAR = "GEMGYM_SERVE_TOKEN"
"""The environment variable a server reads its bearer token from when none is passed."""

DEFAULT_IDLE_TIMEOUT_S = 300.0
"""Seconds a session may sit idle (no message) before the server closes it."""

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one client may ask of a server.

    Args:
        max_body_bytes: the largest HTTP request body (413 beyond).
        max_message_bytes: the largest WebSocket message (the socket closes with 1009 beyond).
        max_json_depth: the deepest nesting of arrays and objects in a JSON body (400 beyond).
        idle_timeout_s: a session without a message for this long is closed.
        header_timeout_s: a connection must send a whole request head (and an idle keep-alive
            connection its next one) within this many seconds, or it is closed.
        body_timeout_s: the most seconds a request body may take to arrive (408 beyond).
        max_connections: open connections at once; requests beyond get 503.
    """

    max_body_bytes: int = 8 * MiB
    max_message_bytes: int = 8 * MiB
    max_json_depth: int = 64
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 2048

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_message_bytes", "max_json_depth", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        for name in ("idle_timeout_s", "header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def resolve_token(token: str | None, host: str, *, insecure: bool = False) -> str | None:
    """The bearer token a server on ``host`` requires: ``token``, else ``$GEMGYM_SERVE_TOKEN``.

    Without either, only a loopback address may be bound, unless ``insecure``: anyone who can
    reach an address could otherwise play (and start sandboxes) on the server.
    """
    if token is None:
        token = os.environ.get(TOKEN_VAR) or None
    if token is not None:
        if not token.strip() or any(c.isspace() for c in token):
            raise ConfigError("the token must be a non-empty string without whitespace")
        return token
    if not is_loopback(host) and not insecure:
        raise ConfigError(
            f"refusing to serve on {host} without a token: anyone who can reach it could use "
            f"the server. Pass a token (or set {TOKEN_VAR}); clients then send "
            "'Authorization: Bearer TOKEN'. On a trusted network, pass insecure to serve "
            "without one"
        )
    return None
