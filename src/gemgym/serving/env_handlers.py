"""The MCP (JSON-RPC over ``POST /mcp``) and WebSocket (``/ws``, ``/mcp``) handlers of
:class:`gemgym.serving.env_server.EnvServer`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from gemgym.serving.env_sessions import (
    _RETRY_AFTER_S,
    _Refused,
    _rpc_error,
    _rpc_result,
    _Session,
    _SessionsMixin,
    _ws_error,
    _ws_send,
)
from gemgym.serving.stack import (
    HTTPError,
    Receive,
    Scope,
    Send,
    client_of,
    decode_json,
    json_bytes,
    send_json,
)


class _HandlersMixin(_SessionsMixin):
    """The MCP and WebSocket half of :class:`EnvServer`."""

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
