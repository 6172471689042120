"""Sessions of :class:`gemgym.serving.env_server.EnvServer`: the caps, opening and closing
sessions, the env work in a session's thread, the lifespan and the idle reaper; and the wire
helpers (errors, JSON-RPC answers) the handlers share."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gemgym.serving import Limits
from gemgym.serving.stack import HTTPError, Metrics, Receive, Send

_RETRY_AFTER_S = 1


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


async def _ws_send(send: Send, text: str) -> None:
    await send({"type": "websocket.send", "text": text})


def _ws_error(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


def _rpc_result(rid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": rid}


def _rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": rid}


class _SessionsMixin:
    """The session half of :class:`EnvServer` (its attributes are set by ``EnvServer``)."""

    env_id: str
    make_kwargs: dict[str, Any]
    max_sessions: int
    max_client_sessions: int
    max_client_envs: int
    limits: Limits
    metrics: Metrics
    sessions: dict[str, _Session]
    _client_sessions: Counter[str]
    _client_envs: Counter[str]
    _stateless_pool: ThreadPoolExecutor
    _reaper: asyncio.Task[None] | None

    def _make(self) -> Any:
        import gemgym

        return gemgym.make(self.env_id, **self.make_kwargs)

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
