"""``gemgym serve``: a gemgym env behind OpenEnv's HTTP / WebSocket / MCP protocol.

The wire protocol is OpenEnv's (0.3), so OpenEnv's ``EnvClient`` / ``GenericEnvClient``, TRL's
OpenEnv path and :class:`gemgym.integrations.openenv.OpenEnvEnv` play on it unchanged:

* ``WS /ws``: a session with its own env; messages ``{"type": "reset", "data": {"seed": 3}}``,
  ``{"type": "step", "data": {"message": "..."}}``, ``{"type": "state"}``, ``{"type": "close"}``
  and ``{"type": "mcp", "data": JSON-RPC}``; answers ``{"type": "observation", "data":
  {"observation": {"text", "truncated", "info"}, "reward", "done"}}``, ``{"type": "state", ...}``
  or ``{"type": "error", "data": {"message", "code"}}``.
* ``POST /reset``: a stateless reset (a fresh env, reset, closed again); ``POST /step``: OpenEnv
  steps a fresh env there, which a gemgym env refuses, so it answers 409 saying to use a session.
* ``POST /mcp`` (JSON-RPC, ``openenv/session/create`` / ``openenv/session/close``) and
  ``WS /mcp``: MCP sessions (gemgym envs have no MCP tools; ``tools/list`` says so).
* ``GET /health``, ``/metrics`` (Prometheus), ``/schema``, ``/metadata``, ``/state``.

It is gemgym's own server (uvicorn, no FastAPI), with the protections of
:mod:`gemgym.serving`: sessions of every kind close after ``idle_timeout_s`` without a message;
the server holds at most ``max_sessions`` sessions, one client (address) at most
``max_client_sessions`` of them and at most ``max_client_envs`` envs (sessions and stateless
resets together: envs may hold sandboxes); stateless resets run at most ``max_stateless`` at a
time. Beyond a cap an HTTP client gets 503 (server full) or 429 (client cap) with
``Retry-After``; a WebSocket client gets an error whose message starts "server full" (code
``CAPACITY_REACHED``, which OpenEnv's clients raise) and a close with code 1013.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gemgym.errors import ConfigError, GemGymError
from gemgym.serving import Limits
from gemgym.serving.env_handlers import _HandlersMixin as _HandlersMixin
from gemgym.serving.env_sessions import (
    _RETRY_AFTER_S as _RETRY_AFTER_S,
    _action_message as _action_message,
    _Refused as _Refused,
    _reset_fields as _reset_fields,
    _rpc_error as _rpc_error,
    _rpc_result as _rpc_result,
    _Session as _Session,
    _SessionsMixin as _SessionsMixin,
    _text_of as _text_of,
    _ws_error as _ws_error,
    _ws_send as _ws_send,
)
from gemgym.serving.stack import (
    HTTPError,
    Metrics,
    Receive,
    Scope,
    Send,
    client_of,
    decode_json,
    guard,
    send_bytes,
    send_json,
)

__all__ = ["EnvServer"]

_SCHEMA = {
    "action": {
        "title": "TextAction",
        "description": "The model's reply.",
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "title": "Metadata"},
            "message": {
                "type": "string",
                "title": "Message",
                "description": "the model's reply, as the env's step() takes it",
            },
        },
        "required": ["message"],
        "additionalProperties": False,
    },
    "observation": {
        "title": "GemgymObservation",
        "description": "What a gemgym env step answered, as OpenEnv carries it.",
        "type": "object",
        "properties": {
            "done": {"type": "boolean", "default": False},
            "reward": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "metadata": {"type": "object"},
            "text": {"type": "string", "default": ""},
            "truncated": {"type": "boolean", "default": False},
            "info": {"type": "object"},
        },
    },
    "state": {
        "title": "State",
        "type": "object",
        "properties": {
            "episode_id": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "step_count": {"type": "integer", "minimum": 0, "default": 0},
        },
        "additionalProperties": True,
    },
}


class _ResetRefused(Exception):
    """The env's ``reset`` raised (a 422: the client's seed or options, not the server)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class EnvServer(_HandlersMixin):
    """The ASGI app of ``gemgym serve`` (see the module docstring).

    Args:
        env_id: a registered env id; every session plays ``gemgym.make(env_id, **make_kwargs)``.
        make_kwargs: keyword arguments of :func:`gemgym.make`.
        max_sessions: sessions (WebSocket and MCP) at once.
        max_client_sessions: sessions one client address holds (default: ``max_sessions``).
        max_client_envs: envs one client address holds, its sessions' and its stateless resets'
            (default: ``max_client_sessions``).
        max_stateless: stateless ``POST /reset`` calls running at once (503 beyond).
        limits: body, message, JSON and idle limits.
        token: the bearer token clients must send (``None``: none).
    """

    def __init__(
        self,
        env_id: str,
        make_kwargs: dict[str, Any] | None = None,
        *,
        max_sessions: int = 64,
        max_client_sessions: int | None = None,
        max_client_envs: int | None = None,
        max_stateless: int = 4,
        limits: Limits | None = None,
        token: str | None = None,
    ) -> None:
        import gemgym

        gemgym.spec(env_id)  # an unknown id fails here, with close matches
        for name, value in (
            ("max_sessions", max_sessions),
            ("max_client_sessions", max_client_sessions),
            ("max_client_envs", max_client_envs),
            ("max_stateless", max_stateless),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        self.env_id = env_id
        self.make_kwargs = dict(make_kwargs or {})
        self.max_sessions = max_sessions
        self.max_client_sessions = max_client_sessions or max_sessions
        self.max_client_envs = max_client_envs or self.max_client_sessions
        self.max_stateless = max_stateless
        self.limits = limits or Limits()
        self.sessions: dict[str, _Session] = {}
        self._client_sessions: Counter[str] = Counter()
        self._client_envs: Counter[str] = Counter()
        self._stateless = 0
        self._stateless_pool = ThreadPoolExecutor(max_stateless, thread_name_prefix="gemgym-reset")
        self._reaper: asyncio.Task[None] | None = None
        self.description = ""
        self.metrics = Metrics(
            "gemgym_serve",
            histogram="step_latency",
            help_histogram="Seconds an env step took on the server (the env's work included)",
            rate_of="steps",
        )
        m = self.metrics
        m.describe("steps", "Env steps played")
        m.describe("resets", "Episodes started (session and stateless resets)")
        m.describe("rejections", "Requests refused, by reason")
        m.describe("sessions_reaped", "Sessions closed for being idle, by kind")
        m.describe("sessions_opened", "Sessions opened, by kind")
        m.describe("errors", "Requests that failed inside the server (500)")
        m.gauge("sessions", "Sessions open now, by kind", self._session_counts)
        m.gauge("sessions_max", "The most sessions the server holds", lambda: [({}, max_sessions)])
        m.gauge(
            "stateless_in_flight", "Stateless resets running now", lambda: [({}, self._stateless)]
        )
        self.app = guard(self._route, limits=self.limits, token=token, metrics=self.metrics)

    def _session_counts(self) -> list[tuple[dict[str, str], float]]:
        counts = Counter(s.kind for s in self.sessions.values())
        return [({"kind": k}, float(counts.get(k, 0))) for k in ("ws", "mcp_ws", "mcp")]

    def check(self) -> None:
        """Build one env and close it: bad ``make_kwargs`` fail here, before serving."""
        try:
            env = self._make()
        except GemGymError:
            raise
        except Exception as e:
            raise ConfigError(
                f"cannot build {self.env_id} with {self.make_kwargs}: {type(e).__name__}: {e}"
            ) from e
        try:
            doc = (type(env).__doc__ or "").strip()
            self.description = doc.split("\n\n")[0].replace("\n", " ") if doc else ""
        finally:
            env.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    # -- routing ---------------------------------------------------------------------------------
    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        path = scope["path"].rstrip("/") or "/"
        if kind == "websocket":
            if path == "/ws":
                await self._websocket(scope, receive, send, mcp=False)
            elif path == "/mcp":
                await self._websocket(scope, receive, send, mcp=True)
            else:
                await receive()
                await send({"type": "websocket.close", "code": 1008, "reason": "no such path"})
            return
        method = scope["method"]
        if method in ("GET", "HEAD"):
            await self._get(path, send)
            return
        if method != "POST":
            raise HTTPError(405, f"{method} is not served; use GET or POST")
        body = (await receive()).get("body", b"")
        if path == "/reset":
            await self._http_reset(scope, body, send)
        elif path == "/step":
            data = self._json_object(body, "the step body")
            if "action" not in data:
                raise HTTPError(422, 'the step body needs "action": {"message": "your reply"}')
            _action_message(data["action"])
            raise HTTPError(
                409,
                "POST /step has no session to step: OpenEnv's HTTP /step plays a fresh env that "
                "was never reset. Play episodes over a session: the WebSocket /ws (OpenEnv's "
                "EnvClient, gemgym's OpenEnvEnv) or an MCP session",
            )
        elif path == "/mcp":
            await self._http_mcp(scope, body, send)
        else:
            raise HTTPError(404, f"no such path {scope['path']!r} (POST /reset, /step, /mcp)")

    def _json_object(self, body: bytes, what: str) -> dict[str, Any]:
        if not body.strip():
            return {}
        value = decode_json(body, self.limits.max_json_depth)
        if not isinstance(value, dict):
            raise HTTPError(422, f"{what} must be a JSON object")
        return value

    async def _get(self, path: str, send: Send) -> None:
        if path in ("/health", "/healthz"):
            await send_json(
                send,
                200,
                {
                    "status": "healthy",
                    "env": self.env_id,
                    "sessions": len(self.sessions),
                    "max_sessions": self.max_sessions,
                },
            )
        elif path == "/metrics":
            body = self.metrics.render().encode("utf-8")
            await send_bytes(send, 200, body, "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/schema":
            await send_json(send, 200, _SCHEMA)
        elif path == "/metadata":
            await send_json(
                send,
                200,
                {
                    "name": self.env_id,
                    "description": self.description or f"the gemgym env {self.env_id}",
                    "readme_content": None,
                    "version": None,
                    "author": None,
                    "documentation_url": None,
                },
            )
        elif path == "/state":
            await send_json(send, 200, {"episode_id": None, "step_count": 0})
        else:
            raise HTTPError(
                404,
                f"no such path {path!r} (GET /health, /metrics, /schema, /metadata, /state)",
            )

    async def _http_reset(self, scope: Scope, body: bytes, send: Send) -> None:
        seed, options, _ = _reset_fields(self._json_object(body, "the reset body"))
        client = client_of(scope)
        if self._stateless >= self.max_stateless:
            self.metrics.inc("rejections", reason="server_full")
            raise _Refused(
                503,
                f"server busy: {self._stateless} stateless resets running (at most "
                f"{self.max_stateless}); retry in {_RETRY_AFTER_S} s, or play over a session",
            ).http()
        try:
            self._admit(client, session=False)
        except _Refused as e:
            raise e.http() from None
        self._stateless += 1
        self._client_envs[client] += 1

        def work() -> dict[str, Any]:
            env = self._make()
            try:
                return self._reset_sync(env, seed, options)
            except Exception as e:  # the env refused the client's seed or options
                raise _ResetRefused(e) from e
            finally:
                env.close()

        try:
            payload = await asyncio.get_running_loop().run_in_executor(self._stateless_pool, work)
        except _ResetRefused as e:
            raise HTTPError(
                422, f"the env refused this reset: {type(e.error).__name__}: {e.error}"
            ) from None
        except GemGymError as e:
            raise HTTPError(422, f"{type(e).__name__}: {e}") from None
        finally:
            self._stateless -= 1
            self._client_envs[client] -= 1
            if self._client_envs[client] <= 0:
                del self._client_envs[client]
        self.metrics.inc("resets")
        await send_json(send, 200, payload)


def serve_env(
    env_id: str,
    make_kwargs: dict[str, Any] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    insecure: bool = False,
    workers: int = 1,
    log_level: str = "warning",
    on_ready: Callable[[str], None] | None = None,
    **server_kwargs: Any,
) -> None:
    """Serve ``env_id`` until interrupted (``gemgym serve``): the token is checked against the
    address, one env is built (bad ``make_kwargs`` fail here), the port is bound, and only then
    is ``on_ready(url)`` called."""
    import os

    from gemgym.serving import resolve_token
    from gemgym.serving.stack import Runner

    token = resolve_token(token, host, insecure=insecure)
    server = EnvServer(env_id, make_kwargs, token=token, **server_kwargs)
    server.check()
    limits = server.limits
    if workers > 1:  # each worker process builds its own app from this variable
        os.environ[SERVE_VAR] = json.dumps(
            {
                "env_id": env_id,
                "make_kwargs": make_kwargs or {},
                "token": token,
                "server": {k: v for k, v in server_kwargs.items() if k != "limits"},
                "limits": limits.__dict__,
            }
        )
        app: Any = f"{__name__}:app_from_environ"
    else:
        app = server
    runner = Runner(
        app,
        host=host,
        port=port,
        limits=limits,
        log_level=log_level,
        workers=workers,
        factory=workers > 1,
        on_ready=None if on_ready is None else lambda: on_ready(f"http://{host}:{runner.port}"),
    )
    runner.serve_forever()


SERVE_VAR = "GEMGYM_SERVE_SPEC"


def app_from_environ() -> EnvServer:
    """The app of one worker process of ``serve_env(..., workers=N)``."""
    import os

    spec = json.loads(os.environ[SERVE_VAR])
    return EnvServer(
        spec["env_id"],
        spec["make_kwargs"],
        token=spec["token"],
        limits=Limits(**spec["limits"]),
        **spec["server"],
    )
