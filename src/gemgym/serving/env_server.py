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
import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gemgym.errors import ConfigError, GemGymError
from gemgym.serving import Limits
from gemgym.serving.stack import (
    HTTPError,
    Metrics,
    Receive,
    Scope,
    Send,
    client_of,
    decode_json,
    guard,
    json_bytes,
    send_bytes,
    send_json,
)

__all__ = ["EnvServer"]

_RETRY_AFTER_S = 1

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


class _Refused(Exception):
    """A session or env the caps do not allow: ``status`` 503 (server) or 429 (client)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def http(self) -> HTTPError:
        return HTTPError(self.status, self.message, headers=[("retry-after", str(_RETRY_AFTER_S))])


class _Session:
    __slots__ = (
        "busy",
        "client",
        "closing",
        "done",
        "env",
        "episode_id",
        "executor",
        "id",
        "kind",
        "last_active",
        "send",
        "step_count",
    )

    def __init__(self, kind: str, client: str) -> None:
        self.id = str(uuid.uuid4())
        self.kind = kind
        self.client = client
        self.env: Any = None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gemgym-session")
        self.last_active = time.monotonic()
        self.episode_id: str | None = None
        self.step_count = 0
        self.done = True
        self.busy = False
        self.closing = False
        self.send: Send | None = None  # a socket session's, for the reaper


def _text_of(obs: Any, info: dict[str, Any]) -> str:
    """What the model is shown (:func:`gemgym.prompting.model_view`: the observation and the
    info's suffix)."""
    from gemgym.integrations.common import observation_text

    return observation_text(obs, info)


def _reset_fields(data: Any) -> tuple[int | None, dict[str, Any] | None, str | None]:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise HTTPError(422, 'reset takes an object: {"seed": 3, "options": {...}}')
    unknown = sorted(set(data) - {"seed", "episode_id", "options"})
    if unknown:
        raise HTTPError(
            422, f"unknown reset fields {unknown}; a gemgym env takes seed, episode_id and options"
        )
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise HTTPError(422, f"'seed' must be an int >= 0 or null, got {seed!r}")
    options = data.get("options")
    if options is not None and not isinstance(options, dict):
        raise HTTPError(422, f"'options' must be an object, got {type(options).__name__}")
    episode_id = data.get("episode_id")
    if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > 255):
        raise HTTPError(422, "'episode_id' must be a string of at most 255 characters")
    return seed, options, episode_id


def _action_message(data: Any) -> str:
    if not isinstance(data, dict):
        raise HTTPError(422, 'the action must be an object: {"message": "your reply"}')
    unknown = sorted(set(data) - {"message", "metadata"})
    if unknown:
        raise HTTPError(422, f'unknown action fields {unknown}; the action is {{"message": ...}}')
    message = data.get("message")
    if not isinstance(message, str):
        raise HTTPError(422, "the action needs 'message', a string (the model's reply)")
    return message


class EnvServer:
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

    def _make(self) -> Any:
        import gemgym

        return gemgym.make(self.env_id, **self.make_kwargs)

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

    # -- caps ----------------------------------------------------------------------------------
    def _admit(self, client: str, *, session: bool) -> None:
        if session and len(self.sessions) >= self.max_sessions:
            self.metrics.inc("rejections", reason="server_full")
            raise _Refused(
                503,
                f"server full: {len(self.sessions)} of {self.max_sessions} sessions in use; "
                f"retry in {_RETRY_AFTER_S} s (or start the server with a larger --max-sessions)",
            )
        if session and self._client_sessions[client] >= self.max_client_sessions:
            self.metrics.inc("rejections", reason="client_cap")
            raise _Refused(
                429,
                f"too many sessions from {client}: {self._client_sessions[client]} of "
                f"{self.max_client_sessions} per client; close one first (the server's "
                "--max-client-sessions)",
            )
        if self._client_envs[client] >= self.max_client_envs:
            self.metrics.inc("rejections", reason="client_cap")
            raise _Refused(
                429,
                f"too many envs from {client}: {self._client_envs[client]} of "
                f"{self.max_client_envs} per client (sessions and stateless resets); wait for "
                "one to finish (the server's --max-client-envs)",
            )

    async def _open(self, kind: str, client: str) -> _Session:
        """A new session with its env built (caps checked first)."""
        self._admit(client, session=True)
        if self._reaper is None or self._reaper.done():  # no lifespan events: start it here
            self._reaper = asyncio.create_task(self._reap())
        session = _Session(kind, client)
        self.sessions[session.id] = session
        self._client_sessions[client] += 1
        self._client_envs[client] += 1
        self.metrics.inc("sessions_opened", kind=kind)
        try:
            loop = asyncio.get_running_loop()
            session.env = await loop.run_in_executor(session.executor, self._make)
        except BaseException:
            await self._close(session)
            raise
        return session

    async def _close(self, session: _Session) -> None:
        if self.sessions.pop(session.id, None) is None:
            return
        self._client_sessions[session.client] -= 1
        self._client_envs[session.client] -= 1
        for counter in (self._client_sessions, self._client_envs):
            if counter[session.client] <= 0:
                del counter[session.client]
        env, session.env = session.env, None
        if env is not None:
            loop = asyncio.get_running_loop()
            with contextlib.suppress(Exception):  # a broken env must not keep its slot
                await loop.run_in_executor(session.executor, env.close)
        session.executor.shutdown(wait=False)

    # -- env work (in the session's thread) -----------------------------------------------------
    def _reset_sync(
        self, env: Any, seed: int | None, options: dict[str, Any] | None
    ) -> dict[str, Any]:
        obs, info = env.reset(seed=seed, options=options)
        return {
            "observation": {"text": _text_of(obs, info), "truncated": False, "info": info},
            "reward": None,
            "done": False,
        }

    def _step_sync(self, env: Any, message: str) -> dict[str, Any]:
        obs, reward, terminated, truncated, info = env.step(message)
        done = bool(terminated or truncated)
        return {
            "observation": {
                "text": _text_of(obs, info),
                "truncated": bool(truncated) and not terminated,
                "info": info,
            },
            "reward": float(reward),
            "done": done,
        }

    async def _session_reset(self, session: _Session, data: Any) -> dict[str, Any]:
        seed, options, episode_id = _reset_fields(data)
        loop = asyncio.get_running_loop()
        payload = await loop.run_in_executor(
            session.executor, self._reset_sync, session.env, seed, options
        )
        session.episode_id = episode_id or uuid.uuid4().hex
        session.step_count = 0
        session.done = False
        self.metrics.inc("resets")
        return payload

    async def _session_step(self, session: _Session, data: Any) -> dict[str, Any]:
        message = _action_message(data)
        if session.done:
            raise HTTPError(409, "the episode has ended (or was never reset); reset first")
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        payload = await loop.run_in_executor(
            session.executor, self._step_sync, session.env, message
        )
        self.metrics.observe(time.perf_counter() - t0)
        self.metrics.inc("steps")
        session.step_count += 1
        session.done = bool(payload["done"])
        return payload

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
            finally:
                env.close()

        try:
            payload = await asyncio.get_running_loop().run_in_executor(self._stateless_pool, work)
        except GemGymError as e:
            raise HTTPError(422, f"{type(e).__name__}: {e}") from None
        finally:
            self._stateless -= 1
            self._client_envs[client] -= 1
            if self._client_envs[client] <= 0:
                del self._client_envs[client]
        self.metrics.inc("resets")
        await send_json(send, 200, payload)

    # -- MCP ---------------------------------------------------------------------------------------
    async def _http_mcp(self, scope: Scope, body: bytes, send: Send) -> None:
        try:
            request = decode_json(body, self.limits.max_json_depth)
        except HTTPError as e:
            self.metrics.inc("rejections", reason="bad_request")
            await send_json(send, 400, _rpc_error(None, -32700, f"Parse error: {e.message}"))
            return
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            self.metrics.inc("rejections", reason="bad_request")
            await send_json(
                send, 400, _rpc_error(None, -32600, "Invalid request: needs a string 'method'")
            )
            return
        status, answer = await self._rpc(request, client_of(scope), None)
        headers = [("retry-after", str(_RETRY_AFTER_S))] if status in (429, 503) else []
        await send_json(send, status, answer, headers)

    async def _rpc(
        self, request: dict[str, Any], client: str, own: _Session | None
    ) -> tuple[int, dict[str, Any]]:
        rid = request.get("id")
        method = request["method"]
        params = request.get("params", {})
        if not isinstance(params, dict):
            return 200, _rpc_error(rid, -32602, "Params must be an object")
        if method == "openenv/session/create":
            if own is not None:
                return 200, _rpc_result(rid, {"session_id": own.id})
            try:
                session = await self._open("mcp", client)
            except _Refused as e:
                return e.status, _rpc_error(rid, -32000, e.message)
            except Exception as e:
                return 200, _rpc_error(rid, -32000, f"cannot build the env: {e}")
            return 200, _rpc_result(rid, {"session_id": session.id})
        if method == "openenv/session/close":
            sid = params.get("session_id")
            if not isinstance(sid, str) or not sid:
                return 200, _rpc_error(rid, -32602, "Invalid params - 'session_id' is required")
            target = self.sessions.get(sid)
            if target is None or target.kind != "mcp":
                return 200, _rpc_error(rid, -32602, f"Unknown session_id: {sid}")
            await self._close(target)
            return 200, _rpc_result(rid, {"session_id": sid, "closed": True})
        if method in ("tools/list", "tools/call"):
            sid = params.get("session_id")
            if sid is not None:
                target = self.sessions.get(sid) if isinstance(sid, str) else None
                if target is None:
                    return 200, _rpc_error(rid, -32602, f"Unknown session_id: {sid}")
                target.last_active = time.monotonic()
            return 200, _rpc_error(
                rid,
                -32603,
                "Environment does not support MCP: a gemgym env has no MCP tools; play it with "
                "reset and step over the WebSocket /ws",
            )
        return 200, _rpc_error(rid, -32601, f"Method not found: {method}")

    # -- WebSocket ---------------------------------------------------------------------------------
    async def _websocket(self, scope: Scope, receive: Receive, send: Send, *, mcp: bool) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        client = client_of(scope)
        try:
            session = await self._open("mcp_ws" if mcp else "ws", client)
        except _Refused as e:
            await self._refuse(receive, send, e, mcp=mcp)
            return
        except Exception as e:
            message = f"cannot build the env {self.env_id}: {type(e).__name__}: {e}"
            await _ws_send(send, json.dumps(_ws_error(message, "FACTORY_ERROR")))
            await send({"type": "websocket.close", "code": 1011, "reason": "env build failed"})
            return
        try:
            await self._ws_loop(session, receive, send, mcp=mcp)
        finally:
            await self._close(session)

    async def _refuse(self, receive: Receive, send: Send, refused: _Refused, *, mcp: bool) -> None:
        """Tell a client over a cap why, as the answer to its first message (OpenEnv's clients
        connect, then send; an error sent before that is lost to them), then close (1013)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(receive(), 2.0)
        if mcp:
            text = json.dumps(_rpc_error(None, -32000, refused.message))
        else:
            error = _ws_error(refused.message, "CAPACITY_REACHED")
            error["data"]["retry_after_s"] = _RETRY_AFTER_S
            text = json.dumps(error)
        await _ws_send(send, text)
        reason = "server full" if refused.status == 503 else "client cap reached"
        await send({"type": "websocket.close", "code": 1013, "reason": reason})

    async def _ws_loop(self, session: _Session, receive: Receive, send: Send, *, mcp: bool) -> None:
        depth = self.limits.max_json_depth
        session.send = send
        while True:
            session.last_active = time.monotonic()
            event = await receive()  # the reaper closes the session when it idles too long
            if event["type"] == "websocket.disconnect" or session.closing:
                return
            text = event.get("text")
            raw: str | bytes = text if text is not None else (event.get("bytes") or b"")
            session.busy = True
            answer: str | None
            try:
                if mcp:
                    answer = await self._mcp_message(session, raw, depth)
                else:
                    answer = await self._ws_message(session, raw, depth)
            finally:
                session.busy = False
            if session.closing:
                return
            if answer is None:
                await send({"type": "websocket.close", "code": 1000})
                return
            await _ws_send(send, answer)

    async def _ws_message(self, session: _Session, raw: str | bytes, depth: int) -> str | None:
        try:
            message = decode_json(raw, depth)
        except HTTPError as e:
            self.metrics.inc("rejections", reason="bad_request")
            return json.dumps(_ws_error(f"Invalid JSON: {e.message}", "INVALID_JSON"))
        if not isinstance(message, dict):
            self.metrics.inc("rejections", reason="bad_request")
            return json.dumps(_ws_error("a message is a JSON object with 'type'", "INVALID_JSON"))
        kind = message.get("type")
        try:
            if kind == "step":
                payload = await self._session_step(session, message.get("data"))
                return json_bytes({"type": "observation", "data": payload}).decode("utf-8")
            if kind == "reset":
                payload = await self._session_reset(session, message.get("data"))
                return json_bytes({"type": "observation", "data": payload}).decode("utf-8")
            if kind == "state":
                state = {"episode_id": session.episode_id, "step_count": session.step_count}
                return json.dumps({"type": "state", "data": state})
            if kind == "close":
                return None
            if kind == "mcp":
                data = message.get("data")
                if not isinstance(data, dict) or not isinstance(data.get("method"), str):
                    rpc = _rpc_error(None, -32600, "Invalid request: needs a string 'method'")
                else:
                    _, rpc = await self._rpc(data, session.client, session)
                return json.dumps({"type": "mcp", "data": rpc})
            self.metrics.inc("rejections", reason="bad_request")
            return json.dumps(
                _ws_error(
                    f"Unknown message type: {kind!r} (reset, step, state, close, mcp)",
                    "UNKNOWN_TYPE",
                )
            )
        except HTTPError as e:
            self.metrics.inc("rejections", reason="bad_request")
            code = "EXECUTION_ERROR" if e.status == 409 else "VALIDATION_ERROR"
            return json.dumps(_ws_error(e.message, code))
        except Exception as e:  # the env failed: the session goes on, as OpenEnv's does
            self.metrics.inc("errors")
            return json.dumps(_ws_error(f"{type(e).__name__}: {e}", "EXECUTION_ERROR"))

    async def _mcp_message(self, session: _Session, raw: str | bytes, depth: int) -> str:
        try:
            request = decode_json(raw, depth)
        except HTTPError as e:
            return json.dumps(_rpc_error(None, -32700, f"Parse error: {e.message}"))
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return json.dumps(_rpc_error(None, -32600, "Invalid request: needs a string 'method'"))
        _, answer = await self._rpc(request, session.client, session)
        return json.dumps(answer)

    # -- lifespan and reaping ----------------------------------------------------------------------
    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self._reaper is None:
                    self._reaper = asyncio.create_task(self._reap())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._reaper is not None:
                    self._reaper.cancel()
                    self._reaper = None
                for session in list(self.sessions.values()):
                    if session.kind == "mcp":  # socket sessions close with their sockets
                        await self._close(session)
                self._stateless_pool.shutdown(wait=False)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _reap(self) -> None:
        """Close sessions of every kind idle longer than the idle timeout (checked every
        quarter of it, at most every 5 s); a socket session is told why, then closed (4408)."""
        idle = self.limits.idle_timeout_s
        interval = min(max(idle / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if session.busy or session.closing or now - session.last_active <= idle:
                    continue
                session.closing = True
                self.metrics.inc("sessions_reaped", kind=session.kind)
                if session.send is not None:
                    message = (
                        f"session closed: idle for {idle:g} s (the server's --idle-timeout); "
                        "reconnect to play on"
                    )
                    if session.kind == "mcp_ws":
                        text = json.dumps(_rpc_error(None, -32000, message))
                    else:
                        text = json.dumps(_ws_error(message, "SESSION_IDLE"))
                    with contextlib.suppress(Exception):  # the client may be gone already
                        await _ws_send(session.send, text)
                        await session.send(
                            {"type": "websocket.close", "code": 4408, "reason": "idle timeout"}
                        )
                await self._close(session)


async def _ws_send(send: Send, text: str) -> None:
    await send({"type": "websocket.send", "text": text})


def _ws_error(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


def _rpc_result(rid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": rid}


def _rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": rid}


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
