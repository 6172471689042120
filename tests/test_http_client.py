"""gemgym's one HTTP client stack (:mod:`gemgym._http`, aiohttp), against real loopback servers.

What every client of the package relies on: answers of any status come back, failures come
back as :class:`TransportError` of the right kind (no connection, no answer in time, a broken
connection), connections are kept alive and shared, a kept-alive connection the server dropped
is replaced without a failure, a client works under several event loops, in several threads and
after a fork, proxies come from the environment; and the clients built on it (the OpenAI agent,
the LLM server backends, the search tool) say which extra to install when aiohttp is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from helpers.extras import reason

pytest.importorskip("aiohttp", reason=reason("openai", "could not import aiohttp"))

from gemgym._http import (
    AsyncClient,
    RetryPolicy,
    SyncClient,
    TransportError,
    require,
)
from gemgym.agents import OpenAIAgent
from gemgym.errors import (
    AgentError,
    ConfigError,
    DependencyNotInstalled,
    ModelUnavailableError,
)


class _Handler(BaseHTTPRequestHandler):
    """``/echo`` (the body back), ``/status/N``, ``/hang`` (no answer until the server
    stops), ``/drop`` (the connection closed without an answer), ``/second-drops`` (the second
    request on a connection is dropped, as a server that closed an idle kept-alive connection
    does), anything else: the request line (how a proxy saw it)."""

    protocol_version = "HTTP/1.1"  # keep-alive

    def setup(self) -> None:
        super().setup()
        server: _Server = self.server  # type: ignore[assignment]
        with server.lock:
            server.connections += 1
        self.on_connection = 0

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        self.on_connection += 1
        with server.lock:
            server.arrivals += 1
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            server.seen.append((self.requestline, dict(self.headers)))
            if self.path == "/hang":
                server.stopping.wait(30)
                self.close_connection = True
                return
            if self.path == "/drop" or (self.path == "/second-drops" and self.on_connection == 2):
                self.close_connection = True
                return
            if self.path == "/v1/models":
                self._answer(200, json.dumps({"data": [{"id": "served"}]}).encode())
            elif self.path == "/v1/chat/completions":
                self._chat(json.loads(body))
            elif self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "/echo")
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path.startswith("/status/"):
                self._answer(int(self.path.rsplit("/", 1)[1]), b'{"error": {"message": "no"}}')
            elif self.path.startswith("/slow"):
                time.sleep(0.2)
                self._answer(200, body)
            elif self.path in ("/echo", "/second-drops"):
                self._answer(200, body)
            else:
                self._answer(200, self.requestline.encode())
        finally:
            with server.lock:
                server.in_flight -= 1

    def _chat(self, request: dict[str, Any]) -> None:
        """An OpenAI-compatible chat server serving model ``served``, as ``server.chat`` says:
        ``"echo"`` (the last message back, as JSON), ``"fail"`` (HTTP 500), ``"overflow"``
        (vLLM's context-length refusal)."""
        server: _Server = self.server  # type: ignore[assignment]
        if request["model"] != "served":
            error = {"error": {"message": f"The model `{request['model']}` does not exist."}}
            self._answer(404, json.dumps(error).encode())
        elif server.chat == "fail":
            self._answer(500, b'{"error": {"message": "engine crashed"}}')
        elif server.chat == "overflow":
            error = {"error": {"message": "This model's maximum context length is 64 tokens"}}
            self._answer(400, json.dumps(error).encode())
        else:
            time.sleep(server.delay)
            content = json.dumps(request["messages"][-1]["content"])
            reply = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
            self._answer(200, json.dumps(reply).encode())

    do_GET = do_POST = _handle

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.connections = self.arrivals = self.in_flight = self.max_in_flight = 0
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.stopping = threading.Event()
        self.chat = "echo"
        self.delay = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    thread = threading.Thread(target=s.serve_forever, daemon=True)
    thread.start()
    yield s
    s.stopping.set()
    s.shutdown()
    s.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _using(client: AsyncClient, coro: Any) -> Any:
    try:
        return await coro
    finally:
        await client.aclose()


# -- answers and failures -----------------------------------------------------------------------
def test_answers_of_any_status_come_back_on_one_kept_alive_connection(server: _Server) -> None:
    client = AsyncClient(server.url, headers={"X-Who": "gemgym"})

    async def go() -> list[Any]:
        out = [await client.post("/echo", b'{"a": 1}') for _ in range(5)]
        out.append(await client.get("/status/503"))
        out.append(await client.post_json("/echo", {"b": [1, 2]}))
        return out

    replies = asyncio.run(_using(client, go()))
    assert [r.status for r in replies] == [200] * 5 + [503, 200]
    assert replies[0].json() == {"a": 1} and replies[-1].json() == {"b": [1, 2]}
    assert replies[5].text == '{"error": {"message": "no"}}'
    assert server.connections == 1  # every request on the same kept-alive connection
    _, headers = server.seen[0]
    assert headers["X-Who"] == "gemgym" and headers["Content-Type"] == "application/json"


def test_no_server_is_a_connect_error_that_says_what_to_do() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = AsyncClient(url)
    with pytest.raises(TransportError) as info:
        asyncio.run(_using(client, client.get("/x")))
    e = info.value
    assert e.kind == "connect" and e.seconds is None and e.url == url + "/x"
    assert "cannot connect to" in str(e) and "is the server running" in str(e)
    assert isinstance(e, ConnectionError)


def test_no_answer_in_time_is_a_timeout_of_that_many_seconds(server: _Server) -> None:
    client = AsyncClient(server.url, timeout=5.0)
    t0 = time.perf_counter()
    with pytest.raises(TransportError) as info:
        asyncio.run(_using(client, client.get("/hang", timeout=0.3)))
    elapsed = time.perf_counter() - t0
    assert info.value.kind == "timeout" and info.value.seconds == 0.3
    assert "did not answer within 0.3 s" in str(info.value)
    assert 0.3 <= elapsed < 3.0


def test_a_connection_dropped_without_an_answer_is_broken_after_one_more_try(
    server: _Server,
) -> None:
    client = AsyncClient(server.url)
    with pytest.raises(TransportError) as info:
        asyncio.run(_using(client, client.post("/drop", b"{}")))
    assert info.value.kind == "broken"
    assert server.arrivals == 2  # sent once more on a new connection, then given up


def test_a_kept_alive_connection_the_server_dropped_is_replaced(server: _Server) -> None:
    client = AsyncClient(server.url)

    async def go() -> list[int]:
        return [(await client.post("/second-drops", b"{}")).status for _ in range(2)]

    assert asyncio.run(_using(client, go())) == [200, 200]
    assert server.arrivals == 3 and server.connections == 2


def test_a_client_works_under_several_event_loops(server: _Server) -> None:
    client = AsyncClient(server.url)
    for _ in range(3):  # each asyncio.run closes its loop's session when it ends
        assert asyncio.run(client.get("/echo")).status == 200
    asyncio.run(client.aclose())
    assert server.connections == 3


def test_max_connections_bounds_the_requests_in_flight(server: _Server) -> None:
    client = AsyncClient(server.url, max_connections=2)

    async def go() -> list[int]:
        replies = await asyncio.gather(*(client.post("/slow", b"{}") for _ in range(6)))
        return [r.status for r in replies]

    assert asyncio.run(_using(client, go())) == [200] * 6
    assert server.max_in_flight == 2


def test_redirects_are_followed_and_the_answer_says_where_from(server: _Server) -> None:
    client = SyncClient(server.url)
    try:
        reply = client.get("/redirect")
    finally:
        client.close()
    assert reply.status == 200 and reply.url == server.url + "/echo"


def test_settings_are_checked_and_name_the_parameter() -> None:
    with pytest.raises(ConfigError, match="base_url must be an http"):
        AsyncClient("127.0.0.1:8000")
    with pytest.raises(ConfigError, match="url must be an http"):
        SyncClient("ftp://x", name="url")
    with pytest.raises(ConfigError, match="timeout"):
        AsyncClient("http://x", timeout=0)
    with pytest.raises(ConfigError, match="max_retries"):
        RetryPolicy(max_retries=-1)


# -- blocking callers ---------------------------------------------------------------------------
def test_sync_client_shares_connections_across_threads(server: _Server) -> None:
    client = SyncClient(server.url)
    try:
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: client.post("/echo", b"%d" % i).status, range(40)))
    finally:
        client.close()
    assert statuses == [200] * 40
    assert server.connections <= 8  # pooled: at most one per request in flight


def test_sync_client_works_in_a_forked_child(server: _Server) -> None:
    client = SyncClient(server.url)
    assert client.get("/echo").status == 200  # the parent's HTTP thread and session exist
    pid = os.fork()
    if pid == 0:  # the child: no HTTP thread until it asks; a new loop and session then
        code = 1
        try:
            code = 0 if client.get("/echo").status == 200 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert client.get("/echo").status == 200  # the parent's client is untouched
    client.close()


def test_proxies_come_from_the_environment(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", server.url)  # the loopback server plays the proxy
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = SyncClient("http://model.invalid:8000/v1")
    try:
        reply = client.get("/models")
    finally:
        client.close()
    assert reply.text == "GET http://model.invalid:8000/v1/models HTTP/1.1"
    loopback = SyncClient(server.url)  # a loopback server: never through the proxy
    try:
        assert loopback.get("/echo").status == 200
    finally:
        loopback.close()
    assert server.seen[-1][0] == "GET /echo HTTP/1.1"
    monkeypatch.setenv("NO_PROXY", "model.invalid")
    with pytest.raises(TransportError) as info:  # straight to the (unresolvable) host
        SyncClient("http://model.invalid:8000/v1", timeout=5.0).get("/models")
    assert info.value.kind == "connect"


def test_import_gemgym_does_not_import_aiohttp() -> None:
    code = "import sys, gemgym, gemgym.agents, gemgym.llm; print('aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_missing_aiohttp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemgym.llm.servers import VLLMBackend
    from gemgym.tools.search import SearchTool

    monkeypatch.setitem(sys.modules, "aiohttp", None)  # import aiohttp fails
    with pytest.raises(DependencyNotInstalled, match=r'pip install "gemgym\[openai\]"'):
        OpenAIAgent(model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(DependencyNotInstalled, match=r'pip install "gemgym\[llm-server\]"'):
        VLLMBackend("http://127.0.0.1:9")
    with pytest.raises(DependencyNotInstalled, match=r'pip install "gemgym\[search\]"'):
        SearchTool(url="http://127.0.0.1:9/retrieve")
    with pytest.raises(DependencyNotInstalled, match="aiohttp"):
        require("eval")


# -- the OpenAI agent on it -----------------------------------------------------------------------
def _act(agent: OpenAIAgent, observations: list[str]) -> list[Any]:
    slots = list(range(len(observations)))
    return agent.act(observations, slots=slots, venv=None)  # type: ignore[arg-type]


def test_openai_agent_refuses_a_model_the_server_does_not_serve(server: _Server) -> None:
    agent = OpenAIAgent(model="other", base_url=server.url + "/v1")
    try:
        with pytest.raises(ModelUnavailableError, match="does not serve model 'other'"):
            _act(agent, ["guess"])
    finally:
        agent.close()


def test_openai_agent_failures_raise_with_the_reason(server: _Server) -> None:
    server.chat = "fail"
    agent = OpenAIAgent(model="served", base_url=server.url + "/v1", max_retries=1)
    try:
        with pytest.raises(AgentError, match=r"HTTP 500: engine crashed.*gave up after 2 tries"):
            _act(agent, ["guess"])
    finally:
        agent.close()


def test_openai_agent_context_overflow_says_what_to_do(server: _Server) -> None:
    server.chat = "overflow"
    agent = OpenAIAgent(model="served", base_url=server.url + "/v1")
    try:
        with pytest.raises(AgentError, match=r"longer than the context.*keep_history"):
            _act(agent, ["guess"])
    finally:
        agent.close()


def test_openai_agent_sends_a_batch_concurrently_up_to_its_limit(server: _Server) -> None:
    server.delay = 0.2
    agent = OpenAIAgent(model="served", base_url=server.url + "/v1", max_concurrency=3)
    try:
        t0 = time.perf_counter()
        replies = _act(agent, [f"obs {i}" for i in range(6)])
        elapsed = time.perf_counter() - t0
    finally:
        agent.close()
    assert replies == [json.dumps(f"obs {i}") for i in range(6)]  # each reply to its own slot
    assert server.max_in_flight == 3
    assert elapsed < 6 * 0.2  # concurrent, not one after another
