"""HTTP clients measured against gemgym's (:mod:`gemgym._http`, aiohttp) by ``benchmarks/eval.py
--client``: httpx, and the keep-alive HTTP/1.1 client on asyncio streams that ``gemgym eval``
used before. Each has :class:`gemgym._http.AsyncClient`'s interface as the chat agent uses it
(``post``, ``get``, ``aclose``; :class:`~gemgym._http.TransportError` when no answer comes).
They are benchmark baselines, not part of the package.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gemgym._http import Response, TransportError


class HttpxClient:
    """httpx's ``AsyncClient`` (the OpenAI SDK's transport), one connection per request in flight."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        **_: Any,
    ) -> None:
        import httpx

        self.httpx = httpx
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.client = httpx.AsyncClient(
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
        )

    async def _send(self, method: str, path: str, body: bytes | None) -> Response:
        url = self.base_url + path
        try:
            headers = {"Content-Type": "application/json"} if body is not None else None
            r = await self.client.request(method, url, content=body, headers=headers)
        except self.httpx.TimeoutException as e:
            raise TransportError("timeout", url, str(e), self.timeout) from e
        except self.httpx.ConnectError as e:
            raise TransportError("connect", url, str(e)) from e
        except self.httpx.HTTPError as e:
            raise TransportError("broken", url, str(e)) from e
        return Response(r.status_code, r.content, url)

    async def post(self, path: str, body: bytes, **_: Any) -> Response:
        return await self._send("POST", path, body)

    async def get(self, path: str = "", **_: Any) -> Response:
        return await self._send("GET", path, None)

    async def aclose(self) -> None:
        await self.client.aclose()


class StreamsClient:
    """gemgym's former client: kept-alive HTTP/1.1 connections on asyncio streams, one per
    request in flight, each request one ``write``; the body sized by ``content-length`` or
    chunked."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 120.0,
        **_: Any,
    ) -> None:
        parts = urlsplit(base_url)
        assert parts.hostname is not None
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        netloc = self.host if parts.port is None else f"{self.host}:{self.port}"
        self._head = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head += f"host: {netloc}\r\n"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes, **_: Any) -> Response:
        request = (
            f"POST {self.prefix}{path} HTTP/1.1\r\n{self._head}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        return await self._send(path, request)

    async def get(self, path: str = "", **_: Any) -> Response:
        request = f"GET {self.prefix}{path} HTTP/1.1\r\n{self._head}\r\n".encode()
        return await self._send(path, request)

    async def _send(self, path: str, request: bytes) -> Response:
        url = self.base_url + path
        try:
            async with asyncio.timeout(self.timeout):
                conn = self._idle.pop() if self._idle else None
                if conn is not None:
                    try:  # a kept-alive connection the server closed meanwhile: a new one
                        return Response(*await self._exchange(conn, request), url)
                    except (OSError, EOFError):
                        pass
                try:
                    conn = await asyncio.open_connection(self.host, self.port, ssl=self.ssl)
                except OSError as e:
                    raise TransportError("connect", url, str(e)) from e
                return Response(*await self._exchange(conn, request), url)
        except TimeoutError as e:
            raise TransportError("timeout", url, "no answer", self.timeout) from e
        except (OSError, EOFError, ValueError) as e:
            raise TransportError("broken", url, str(e)) from e

    async def _exchange(
        self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes
    ) -> tuple[int, bytes]:
        reader, writer = conn
        reuse = False
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                key, sep, value = line.partition(":")
                if sep:
                    headers[key.strip().lower()] = value.strip()
            if "content-length" in headers:
                data = await reader.readexactly(int(headers["content-length"]))
            elif headers.get("transfer-encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    if size == 0:
                        await reader.readuntil(b"\r\n")
                        break
                    chunks.append(await reader.readexactly(size))
                    await reader.readexactly(2)
                data = b"".join(chunks)
            else:
                data = await reader.read()
                headers["connection"] = "close"
            reuse = headers.get("connection", "").lower() != "close"
            return status, data
        finally:
            if reuse:
                self._idle.append(conn)
            else:
                writer.close()

    async def aclose(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


CLIENTS: dict[str, type[Any]] = {"httpx": HttpxClient, "streams": StreamsClient}
