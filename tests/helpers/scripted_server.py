"""A scripted OpenAI-compatible chat server on loopback, for testing harnesses and agents.

Test scaffolding (``tests/helpers``, not part of the gemgym package).

It speaks enough of the chat-completions API for any OpenAI client (``POST
/v1/chat/completions``, ``GET /v1/models``), answers with a function of the request, records
every request it receives, and injects faults on demand: a share of requests answered with HTTP
500 and a share that hang (no answer until the server stops). A reply function may also answer
a dict: ``{"status": 400, "error": "..."}`` (an error reply, e.g. vLLM's context overflow), or
``{"content": None, "reasoning_content": "...", "finish_reason": "length"}`` (the message's
fields as given). With ``models`` it serves only those names (404 for others, as vLLM); with
``api_key`` it refuses other keys (401). It is a real HTTP/1.1 server
(keep-alive, asyncio streams) in a background thread, fast enough to benchmark a harness:

>>> with ScriptedChatServer(reply="\\\\boxed{7}") as server:  # doctest: +SKIP
...     client = openai.OpenAI(base_url=server.url, api_key="x")

Run it on its own from a checkout (e.g. to try ``gemgym eval``; it imports only gemgym)::

    python tests/helpers/scripted_server.py --port 8000 --reply '\\boxed{5}' --fail-rate 0.3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from gemgym.errors import ConfigError

__all__ = ["ScriptedChatServer"]

Reply = Callable[[dict[str, Any]], "str | dict[str, Any]"]


def _constant(text: str) -> Reply:
    def reply(_body: dict[str, Any]) -> str:
        return text

    return reply


class ScriptedChatServer:
    """An OpenAI-compatible chat server whose answers and faults are scripted.

    Args:
        reply: the assistant's text: a string, or ``reply(request_body) -> str``.
        fail_rate: share of chat requests answered with HTTP 500.
        hang_rate: share of chat requests never answered (until :meth:`stop`).
        delay: seconds each answer waits (a slow model).
        seed: seed of the fault draws (one stream, in arrival order).
        host, port: where to listen (port 0: a free port, see :attr:`url`).
        record: keep every chat request body in :attr:`requests`.
        reply_ids: ``reply_ids(request_body) -> token ids`` for ``POST /v1/completions`` with
            token-id prompts (vLLM's extensions: ``token_ids`` in the answer), as
            :class:`gemgym.llm.servers.VLLMBackend` asks.
        models: the model names served (``GET /v1/models`` lists them; a chat request for
            another name is answered 404); ``None``: any name, and the list is empty.
        api_key: the bearer key required (401 otherwise); ``None``: any.
    """

    def __init__(
        self,
        reply: str | Reply = "\\boxed{1}",
        *,
        fail_rate: float = 0.0,
        hang_rate: float = 0.0,
        delay: float = 0.0,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        reply_ids: Callable[[dict[str, Any]], list[int]] | None = None,
        models: tuple[str, ...] | list[str] | None = None,
        api_key: str | None = None,
    ) -> None:
        if not 0 <= fail_rate <= 1 or not 0 <= hang_rate <= 1 or fail_rate + hang_rate > 1:
            raise ConfigError("fail_rate and hang_rate must be in [0, 1] and sum to at most 1")
        self._reply: Reply = _constant(reply) if isinstance(reply, str) else reply
        self.fail_rate = fail_rate
        self.hang_rate = hang_rate
        self.delay = delay
        self.host = host
        self.port = port
        self.record = record
        self.reply_ids = reply_ids
        self.models = None if models is None else tuple(models)
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.counts = {"ok": 0, "failed": 0, "hung": 0}
        self._rng = random.Random(seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (``http://host:port/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> ScriptedChatServer:
        """Start serving in a background thread; returns once the port is bound."""
        self._thread = threading.Thread(target=self._run, name="scripted-chat-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        """Stop serving (hanging requests are dropped) and join the thread."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> ScriptedChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        asyncio.run(self._serve())

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # reported to start()
            self._error = e
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        handlers: set[asyncio.Task[None]] = set()

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            handlers.add(task)
            try:
                await self._handle(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                pass
            finally:
                handlers.discard(task)
                writer.close()

        server = await asyncio.start_server(on_client, self.host, self.port, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for t in list(handlers):
                t.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

    # -- HTTP ----------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                key, sep, value = line.partition(":")
                if sep:
                    headers[key.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            body = await reader.readexactly(length) if length else b""
            if self.api_key is not None and headers.get("authorization") != (
                f"Bearer {self.api_key}"
            ):
                status, payload = (
                    401,
                    {"error": {"message": "Incorrect API key provided", "type": "invalid_api_key"}},
                )
            else:
                status, payload = await self._route(method, path, body)
            data = json.dumps(payload).encode()
            writer.write(
                f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                "content-type: application/json\r\n"
                f"content-length: {len(data)}\r\n\r\n".encode()
                + data
            )
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                return

    async def _route(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path.endswith("/models"):
            data = [{"id": m, "object": "model"} for m in self.models or ()]
            return 200, {"object": "list", "data": data}
        if method == "POST" and path.endswith("/v1/completions"):
            return await self._completion(body)
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {method} {path}"}}
        try:
            request = json.loads(body)
        except json.JSONDecodeError as e:
            return 400, {"error": {"message": f"bad JSON: {e}"}}
        if self.record:
            self.requests.append(request)
        if self.models is not None and request.get("model") not in self.models:
            missing = f"The model `{request.get('model')}` does not exist."
            return 404, {"error": {"message": missing, "type": "NotFoundError", "code": 404}}
        draw = self._rng.random()
        if draw < self.fail_rate:
            self.counts["failed"] += 1
            return 500, {"error": {"message": "scripted failure", "type": "server_error"}}
        if draw < self.fail_rate + self.hang_rate:
            self.counts["hung"] += 1
            await asyncio.Event().wait()  # until the server stops
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = self._reply(request)
        if isinstance(answer, dict) and "status" in answer:
            self.counts["failed"] += 1
            return int(answer["status"]), {"error": {"message": str(answer.get("error", ""))}}
        self.counts["ok"] += 1
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        finish = "stop"
        if isinstance(answer, dict):
            message = {"role": "assistant", "content": None, **answer}
            finish = str(message.pop("finish_reason", "stop"))
        text = str(message.get("content") or "")
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        return 200, {
            "id": f"chatcmpl-{self.counts['ok']}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": max(1, prompt_chars // 4),
                "completion_tokens": max(1, len(text) // 4),
                "total_tokens": max(1, prompt_chars // 4) + max(1, len(text) // 4),
            },
        }

    async def _completion(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """vLLM's token-id completions: ``prompt`` ids in, ``token_ids`` of the reply out."""
        request = json.loads(body)
        if self.record:
            self.requests.append(request)
        if self.reply_ids is None:
            return 404, {"error": {"message": "this server was given no reply_ids"}}
        ids = self.reply_ids(request)
        self.counts["ok"] += 1
        return 200, {
            "object": "text_completion",
            "choices": [
                {"index": 0, "text": "", "token_ids": ids, "finish_reason": "stop",
                 "logprobs": {"token_logprobs": [-1.0] * len(ids)}}
            ],
            "usage": {"prompt_tokens": len(request.get("prompt") or []),
                      "completion_tokens": len(ids)},
        }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """``python tests/helpers/scripted_server.py``: serve until interrupted."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--reply", default="\\boxed{1}", help="the assistant's text for every request")
    p.add_argument("--fail-rate", type=float, default=0.0)
    p.add_argument("--hang-rate", type=float, default=0.0)
    p.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    server = ScriptedChatServer(
        args.reply,
        fail_rate=args.fail_rate,
        hang_rate=args.hang_rate,
        delay=args.delay,
        seed=args.seed,
        host=args.host,
        port=args.port,
        record=False,
    )
    print(f"serving on {server.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
