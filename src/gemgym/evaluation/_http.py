"""A small keep-alive HTTP/1.1 client on asyncio streams, for the chat requests of an eval.

Why not httpx or aiohttp: against a server that answers at once, ``gemgym eval`` with httpx
(the OpenAI SDK's client) ran 58 GuessTheNumber episodes/s and with aiohttp 149 at concurrency
64 (docs/benchmarks.md); the harness must never be the bottleneck, and a chat request needs
only this: ``POST`` one JSON body on a kept-alive connection, read one response (sized by
``content-length`` or chunked). Each request is one ``write``; connections are reused, one per
request in flight; a connection that fails or is cancelled mid-request is closed, never reused.
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

from gemgym.errors import ConfigError

__all__ = ["HttpPool"]


class HttpPool:
    """Keep-alive connections to one ``http(s)://host:port`` origin."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--base-url must be an http(s):// URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = (
            ssl.create_default_context() if parts.scheme == "https" else None
        )
        self.prefix = parts.path.rstrip("/")
        netloc = self.host if parts.port is None else f"{self.host}:{self.port}"
        self._head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._head += f"host: {netloc}\r\n"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """``POST prefix+path`` with a JSON body; returns ``(status, body)``.

        Raises ``OSError`` (or ``asyncio.IncompleteReadError``, a subclass of ``EOFError``)
        when the connection fails.
        """
        request = (
            f"POST {self.prefix}{path} HTTP/1.1\r\n{self._head}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        return await self._send(request)

    async def get(self, path: str) -> tuple[int, bytes]:
        """``GET prefix+path``; returns ``(status, body)`` (raises as :meth:`post`)."""
        return await self._send(f"GET {self.prefix}{path} HTTP/1.1\r\n{self._head}\r\n".encode())

    async def connect(self) -> None:
        """Open one connection (kept for the next request): raises ``OSError`` when the
        server cannot be reached."""
        self._idle.append(await asyncio.open_connection(self.host, self.port, ssl=self.ssl))

    async def _send(self, request: bytes) -> tuple[int, bytes]:
        conn = self._idle.pop() if self._idle else None
        if conn is not None:
            try:  # a kept-alive connection the server closed meanwhile: retry on a new one
                return await self._exchange(conn, request)
            except (OSError, EOFError):
                pass
        conn = await asyncio.open_connection(self.host, self.port, ssl=self.ssl)
        return await self._exchange(conn, request)

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
                        await reader.readuntil(b"\r\n")  # no trailers expected
                        break
                    chunks.append(await reader.readexactly(size))
                    await reader.readexactly(2)
                data = b"".join(chunks)
            else:  # the body ends when the server closes the connection
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
        """Close the idle connections."""
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
