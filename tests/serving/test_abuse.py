"""``gemgym serve`` under abuse: real servers on loopback, one test per abuse (issue 44).

Idle and orphan sessions are reaped, oversized and malformed requests are 4xx with a message,
tokens are enforced, caps per server and per client hold, and a client over a cap is told
"server full" (or which cap) instead of a silent close.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason='needs pip install "gemgym[serve]"')

import httpx
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

import gemgym
from gemgym.errors import ConfigError
from gemgym.serving import Limits, resolve_token
from gemgym.serving.env_server import EnvServer
from gemgym.serving.stack import Runner
from helpers.envs import CountingEnv
from helpers.net import free_port, gemgym_server, post_streamed, rss_kib

GUESS = "game:GuessTheNumber-v0-easy"
SRC = str(Path(__file__).parents[2] / "src")


class SlowEnv(CountingEnv):
    """An env that takes 0.3 s to reset and counts how many instances are alive at once (a
    stand-in for an env holding a sandbox)."""

    lock = threading.Lock()
    alive = 0
    most = 0

    def __init__(self) -> None:
        super().__init__(episode_length=3)
        with SlowEnv.lock:
            SlowEnv.alive += 1
            SlowEnv.most = max(SlowEnv.most, SlowEnv.alive)
        self._closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        time.sleep(0.3)
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with SlowEnv.lock:
                SlowEnv.alive -= 1


gemgym.register("serving-test:Slow-v0", SlowEnv, override=True)


@contextmanager
def served(env_id: str = GUESS, **kwargs: Any) -> Iterator[tuple[str, EnvServer]]:
    limits = kwargs.pop("limits", None) or Limits(idle_timeout_s=kwargs.pop("idle", 300.0))
    app = EnvServer(env_id, limits=limits, **kwargs)
    runner = Runner(app, host="127.0.0.1", port=0, limits=limits).start()
    try:
        yield f"http://127.0.0.1:{runner.port}", app
    finally:
        runner.stop()


def _ws(url: str, path: str = "/ws", **kwargs: Any) -> Any:
    return connect(url.replace("http://", "ws://") + path, open_timeout=10, **kwargs)


def _ask(ws: Any, message: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(message))
    answer: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return answer


def _wait(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- idle and orphan sessions ---------------------------------------------------------------------
_RESET = {"type": "reset", "data": {"seed": 1}}
_CREATE = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}


@pytest.mark.parametrize(
    ("path", "kind", "first"), [("/ws", "ws", _RESET), ("/mcp", "mcp_ws", _CREATE)]
)
def test_an_idle_websocket_session_is_closed_within_the_timeout(
    path: str, kind: str, first: dict[str, Any]
) -> None:
    with served(max_sessions=1, idle=0.5) as (url, app):
        ws = _ws(url, path)
        assert "error" not in _ask(ws, first)
        started = time.monotonic()
        answer = json.loads(ws.recv(timeout=5))  # the server speaks first: the session is over
        if kind == "ws":
            assert answer["data"]["code"] == "SESSION_IDLE"
        message = answer["data"]["message"] if kind == "ws" else answer["error"]["message"]
        assert "idle for 0.5 s" in message
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408
        assert time.monotonic() - started < 2.0
        _wait(lambda: not app.sessions)
        with _ws(url, path) as again:  # the slot is free again
            assert "error" not in _ask(again, first)
        assert app.metrics.counter("sessions_reaped", kind=kind) == 1


def test_orphan_mcp_sessions_are_reaped_and_their_slots_freed() -> None:
    with served(max_sessions=2, idle=0.5) as (url, app):
        create = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}
        ids = [httpx.post(f"{url}/mcp", json=create).json()["result"]["session_id"] for _ in "ab"]
        assert len(set(ids)) == 2
        full = httpx.post(f"{url}/mcp", json=create)
        assert full.status_code == 503 and full.headers["retry-after"] == "1"
        assert full.json()["error"]["message"].startswith("server full: 2 of 2 sessions")
        _wait(lambda: not app.sessions, timeout_s=3.0)  # nobody closed them: the reaper did
        assert app.metrics.counter("sessions_reaped", kind="mcp") == 2
        assert "result" in httpx.post(f"{url}/mcp", json=create).json()


def test_connections_that_send_nothing_are_closed() -> None:
    limits = Limits(header_timeout_s=0.5)
    with served(limits=limits) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
        slow = socks[0]
        slow.sendall(b"GET /health HTTP/1.1\r\n")  # a head that never ends
        started = time.monotonic()
        for s in socks:
            s.settimeout(5)
            assert s.recv(1024) == b""  # closed by the server
            s.close()
        assert time.monotonic() - started < 3.0
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_trickled_head_or_body_is_cut_off() -> None:
    """Slowloris: a head sent a byte at a time is closed at the head deadline (not reset by
    each byte), a body that stops arriving is answered 408."""
    limits = Limits(header_timeout_s=1.0, body_timeout_s=0.5)
    with served(limits=limits) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            started = time.monotonic()
            closed_after = None
            for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                try:
                    s.sendall(bytes([byte]))
                except OSError:
                    closed_after = time.monotonic() - started
                    break
                time.sleep(0.05)
                s.setblocking(False)
                try:
                    if s.recv(100) == b"":
                        closed_after = time.monotonic() - started
                        break
                except BlockingIOError:
                    pass
                finally:
                    s.setblocking(True)
            assert closed_after is not None and closed_after < 2.5, closed_after
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408")
        assert b"did not arrive within 0.5 s" in answer
        assert httpx.get(f"{url}/health").status_code == 200


def test_connections_beyond_the_limit_get_503_and_the_server_recovers() -> None:
    with served(limits=Limits(max_connections=8)) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(12)]
        try:
            time.sleep(0.3)
            full = httpx.get(f"{url}/health", timeout=10)
            assert full.status_code == 503 and full.headers["retry-after"] == "1"
            assert full.json()["error"].startswith("server full")
        finally:
            for s in held:
                s.close()
        _wait(lambda: httpx.get(f"{url}/health", timeout=10).status_code == 200)


# -- sizes ------------------------------------------------------------------------------------------
def test_a_200_mib_body_is_413_and_the_server_memory_stays_flat() -> None:
    with gemgym_server("serve", GUESS, what="gemgym serve") as server:
        url, port = server.url, server.port
        assert httpx.post(f"{url}/reset", json={"seed": 1}).status_code == 200  # warm
        before = rss_kib(server.proc.pid)
        answer = post_streamed(port, "/reset", 200 * 1024 * 1024)
        grown = rss_kib(server.proc.pid) - before
        assert answer.startswith("HTTP/1.1 413"), answer[:200]
        assert "larger than this server takes" in answer
        assert grown < 20 * 1024, f"server RSS grew {grown} KiB"
        # far too large to be worth reading: answered at once, before any body
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            head = "POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            s.sendall(f"{head}Content-Length: {1 << 40}\r\n\r\n".encode())
            assert s.recv(65536).startswith(b"HTTP/1.1 413")
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_websocket_message_over_the_limit_closes_with_1009() -> None:
    with served(limits=Limits(max_message_bytes=64 * 1024)) as (url, _), _ws(url) as ws:
        ws.send(json.dumps({"type": "step", "data": {"message": "x" * 100_000}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


# -- tokens -----------------------------------------------------------------------------------------
def test_without_the_token_requests_are_401() -> None:
    limits = Limits()
    app = EnvServer(GUESS, token="s3cret", limits=limits)
    runner = Runner(app, host="127.0.0.1", port=0, limits=limits).start()
    url = f"http://127.0.0.1:{runner.port}"
    try:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic s3cret"}):
            r = httpx.post(f"{url}/reset", json={}, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer TOKEN" in r.json()["error"]
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert httpx.get(f"{url}/health").status_code == 200  # for load balancers
        ok = {"authorization": "Bearer s3cret"}
        assert httpx.post(f"{url}/reset", json={}, headers=ok).status_code == 200
        assert httpx.post(f"{url}/reset?token=s3cret", json={}).status_code == 200
        with pytest.raises(InvalidStatus) as denied:
            _ws(url)
        assert denied.value.response.status_code == 401
        with _ws(url, additional_headers=ok) as ws:
            assert _ask(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
        assert app.metrics.counter("rejections", reason="auth") == 5
    finally:
        runner.stop()


def test_gemgyms_client_sends_the_token_and_says_when_it_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openenv.core.env_server", reason='needs pip install "gemgym[openenv]"')
    from gemgym.errors import EnvLostError
    from gemgym.integrations.openenv import OpenEnvEnv
    from gemgym.integrations.openenv_pool import EndpointPool

    monkeypatch.delenv("GEMGYM_SERVE_TOKEN", raising=False)
    with served(token="s3cret") as (url, _):
        for token, why in ((None, "no token sent"), ("wrong", "not its token")):
            env = OpenEnvEnv(url, token=token)
            with pytest.raises(ConfigError, match=rf"refused this client \(HTTP 401: {why}\)"):
                env.reset(seed=1)
            assert env.pool.status()[0]["up"]  # a refused token does not mark it down
        env = OpenEnvEnv(url, token="s3cret")
        assert "Guess" in env.reset(seed=1)[0]
        env.close()
        monkeypatch.setenv("GEMGYM_SERVE_TOKEN", "s3cret")
        env = OpenEnvEnv(url)
        assert "Guess" in env.reset(seed=1)[0]
        env.close()
        with pytest.raises(ConfigError, match="the token goes to the pool"):
            OpenEnvEnv(EndpointPool(url), token="s3cret")
    # a server that is gone: the error names it, never the token
    gone = OpenEnvEnv(f"http://127.0.0.1:{free_port()}", token="s3cret")
    with pytest.raises(EnvLostError) as lost:
        gone.reset(seed=1)
    assert "s3cret" not in str(lost.value) and "s3cret" not in str(gone.pool.status())


def test_a_public_address_needs_a_token_or_insecure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMGYM_SERVE_TOKEN", raising=False)
    assert resolve_token(None, "127.0.0.1") is None
    assert resolve_token(None, "::1") is None
    with pytest.raises(ConfigError, match=r"refusing to serve on 0\.0\.0\.0 without a token") as e:
        resolve_token(None, "0.0.0.0")
    assert "pass insecure to serve" in str(e.value) and "--" not in str(e.value)  # parameters
    assert resolve_token(None, "0.0.0.0", insecure=True) is None
    assert resolve_token("abc", "0.0.0.0") == "abc"
    monkeypatch.setenv("GEMGYM_SERVE_TOKEN", "from-env")
    assert resolve_token(None, "10.0.0.1") == "from-env"
    monkeypatch.delenv("GEMGYM_SERVE_TOKEN")
    proc = subprocess.run(
        [sys.executable, "-m", "gemgym", "serve", GUESS, "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "GEMGYM_SERVE_TOKEN"}
        | {"PYTHONPATH": SRC},
    )
    assert proc.returncode == 2 and "serving" not in proc.stdout
    assert "Pass a token (--token)" in proc.stderr  # the command shows the flags
    assert "pass insecure (--insecure) to serve" in proc.stderr


# -- malformed requests -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("POST", "/step", {"action": {"message": "\\boxed{3}"}}, 409, "no session"),
        ("POST", "/step", {}, 422, '"action"'),
        ("POST", "/step", {"action": {"msg": "x"}}, 422, "unknown action fields"),
        ("POST", "/step", b"{not json", 400, "not valid JSON"),
        ("POST", "/step", b"[" * 100_000, 400, "nests deeper than 64"),
        ("POST", "/reset", b"[" * 65 + b"]" * 65, 400, "nests deeper than 64"),
        ("POST", "/reset", {"seed": "x"}, 422, "'seed'"),
        ("POST", "/reset", {"seed": -1}, 422, "'seed'"),
        ("POST", "/reset", {"bogus": 1}, 422, "unknown reset fields"),
        ("POST", "/reset", [1, 2], 422, "JSON object"),
        ("POST", "/reset", b"\xff\xfe", 400, "not valid JSON"),
        ("POST", "/nope", {}, 404, "no such path"),
        ("GET", "/nope", None, 404, "no such path"),
        ("PUT", "/reset", {}, 405, "not served"),
    ],
)
def test_every_malformed_request_is_a_4xx_with_a_message(
    guess_server: str, method: str, path: str, body: Any, status: int, message: str
) -> None:
    if isinstance(body, bytes):
        r = httpx.request(method, guess_server + path, content=body)
    else:
        r = httpx.request(method, guess_server + path, json=body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert message in r.json()["error"]


class PickyEnv(CountingEnv):
    """Refuses options it does not know, as many envs do (a ValueError, not a gemgym error)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if options:
            raise ValueError(f"unknown options {sorted(options)}")
        return super().reset(seed=seed, options=options)


gemgym.register("serving-test:Picky-v0", PickyEnv, override=True)


def test_an_env_refusing_the_clients_reset_is_a_422_not_a_500() -> None:
    with served("serving-test:Picky-v0") as (url, app):
        r = httpx.post(f"{url}/reset", json={"options": {"level": 9}})
        assert r.status_code == 422
        assert (
            r.json()["error"] == "the env refused this reset: ValueError: unknown options ['level']"
        )
        assert httpx.post(f"{url}/reset", json={"seed": 1}).status_code == 200
        with _ws(url) as ws:  # over a session: an error message, and the session goes on
            answer = _ask(ws, {"type": "reset", "data": {"options": {"level": 9}}})
            assert answer["data"]["code"] == "EXECUTION_ERROR"
            assert "unknown options" in answer["data"]["message"]
            assert _ask(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        assert app.metrics.counter("errors") == 1  # the session's (the env failed), no 500


@pytest.fixture(scope="module")
def guess_server() -> Iterator[str]:
    with served() as (url, _):
        yield url


def test_malformed_http_framing_is_a_400_not_a_dropped_connection(guess_server: str) -> None:
    port = int(guess_server.rsplit(":", 1)[1])
    for head in (
        b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
        b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
        b"NOT-HTTP\r\n\r\n",
    ):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head)
            answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 400"), answer


def test_mcp_and_websocket_garbage_get_protocol_errors(guess_server: str) -> None:
    r = httpx.post(f"{guess_server}/mcp", content=b"{oops")
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    r = httpx.post(f"{guess_server}/mcp", json={"jsonrpc": "2.0", "id": 1})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600
    r = httpx.post(f"{guess_server}/mcp", json={"jsonrpc": "2.0", "method": "nope", "id": 1})
    assert r.json()["error"]["code"] == -32601
    with _ws(guess_server) as ws:
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        ws.send("[" * 10_000)
        assert "nests deeper" in json.loads(ws.recv(timeout=10))["data"]["message"]
        step = _ask(ws, {"type": "step", "data": {"message": "\\boxed{3}"}})
        assert (
            step["data"]["code"] == "EXECUTION_ERROR" and "reset first" in step["data"]["message"]
        )
        bad = _ask(ws, {"type": "step", "data": {"message": 3}})
        assert bad["data"]["code"] == "VALIDATION_ERROR"
        assert _ask(ws, {"type": "dance"})["data"]["code"] == "UNKNOWN_TYPE"
        # the session survives every one of them
        assert _ask(ws, {"type": "reset", "data": {"seed": 2}})["type"] == "observation"
        assert _ask(ws, {"type": "state"})["data"]["step_count"] == 0


# -- caps and back-pressure -----------------------------------------------------------------------------
def test_one_client_cannot_hold_more_envs_than_its_cap() -> None:
    SlowEnv.most = 0
    with served("serving-test:Slow-v0", max_client_envs=2, max_stateless=8) as (url, app):
        results: list[httpx.Response] = []

        def reset() -> None:
            results.append(httpx.post(f"{url}/reset", json={"seed": 1}, timeout=30))

        threads = [threading.Thread(target=reset) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(r.status_code for r in results)
        assert set(codes) == {200, 429} and codes.count(200) >= 2
        refused = next(r for r in results if r.status_code == 429)
        assert refused.headers["retry-after"] == "1"
        assert "too many envs from 127.0.0.1: 2 of 2 per client" in refused.json()["error"]
        assert SlowEnv.most <= 2 + 1  # + the one the server built at start to check the id
        # sessions count against the same cap
        with _ws(url) as a, _ws(url) as b:
            for ws in (a, b):
                assert _ask(ws, {"type": "reset", "data": {}})["type"] == "observation"
            with _ws(url) as c:
                answer = _ask(c, {"type": "reset", "data": {}})
                assert answer["data"]["code"] == "CAPACITY_REACHED"
                assert "too many envs" in answer["data"]["message"]
        _wait(lambda: SlowEnv.alive == 0 and not app.sessions)


def _sandboxes() -> set[int]:
    """The bubblewrap sandboxes this test process started (through any chain of children): the
    outermost bwrap of each (bwrap forks once more inside its namespaces)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        parents[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), name)
    ours = {os.getpid()}
    grew = True
    while grew:
        new = {pid for pid, (ppid, _) in parents.items() if ppid in ours and pid not in ours}
        ours |= new
        grew = bool(new)
    return {
        pid
        for pid in ours
        if parents.get(pid, (0, ""))[1] == "bwrap"
        and parents.get(parents[pid][0], (0, ""))[1] != "bwrap"
    }


def test_one_client_cannot_start_unbounded_terminal_sandboxes() -> None:
    """The abuse as it was found: one client fires 40 stateless resets of a terminal env at
    once. Real bubblewrap sandboxes: at most the client's env cap of them run at once, the rest
    are refused (429, Retry-After), and none is left running afterwards."""
    from gemgym.sandbox.bwrap import bwrap_available

    if not bwrap_available():
        pytest.skip("bubblewrap is not installed")
    before = _sandboxes()  # other tests' warm sandboxes stay
    peak = [0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], len(_sandboxes() - before))
            time.sleep(0.02)

    with served("terminal:count-errors", max_client_envs=2, max_stateless=8) as (url, app):
        sampler = threading.Thread(target=sample)
        sampler.start()
        results: list[httpx.Response] = []

        def reset() -> None:
            results.append(httpx.post(f"{url}/reset", json={"seed": 1}, timeout=120))

        threads = [threading.Thread(target=reset) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # two sessions hold the client's two envs: a stateless reset is refused meanwhile
        with _ws(url) as a, _ws(url) as b:
            for ws in (a, b):
                assert _ask(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
            refused = httpx.post(f"{url}/reset", json={}, timeout=60)
            assert refused.status_code == 429 and "2 of 2 per client" in refused.json()["error"]
        sampling.set()
        sampler.join()
        codes = [r.status_code for r in results]
        assert set(codes) == {200, 429} and codes.count(200) >= 2, codes
        assert all(r.headers["retry-after"] == "1" for r in results if r.status_code == 429)
        _wait(lambda: not app.sessions, timeout_s=30)
    # two envs at most, each with its shell's sandbox and the one its grader starts ahead
    assert 1 <= peak[0] <= 2 * 2, peak[0]
    _wait(lambda: not _sandboxes() - before, timeout_s=30)


def test_a_full_server_is_seen_by_the_client_as_server_full() -> None:
    pytest.importorskip("openenv.core.env_server", reason='needs pip install "gemgym[openenv]"')
    from openenv.core.generic_client import GenericEnvClient

    with served(max_sessions=1) as (url, app):
        with GenericEnvClient(base_url=url).sync() as first:
            first.reset(seed=1)
            with GenericEnvClient(base_url=url).sync() as second:
                with pytest.raises(RuntimeError, match=r"server full: 1 of 1 sessions") as err:
                    second.reset(seed=2)
                assert "CAPACITY_REACHED" in str(err.value)
            with _ws(url) as raw:  # and the socket closes with 1013, "server full"
                raw.send(json.dumps({"type": "reset", "data": {}}))
                assert "server full" in json.loads(raw.recv(timeout=10))["data"]["message"]
                with pytest.raises(ConnectionClosed) as closed:
                    raw.recv(timeout=10)
                assert closed.value.rcvd is not None
                assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1013, "server full")
            first.step({"message": "\\boxed{5}"})  # the session in the slot plays on
        assert app.metrics.counter("rejections", reason="server_full") == 2


def test_a_full_server_is_seen_by_gemgyms_client_as_server_full() -> None:
    """OpenEnvEnv (on its endpoint pool) tells "full" from "lost": a reset no server has room
    for raises ServerFullError (stage "env"), naming each server's cap; the servers stay up."""
    pytest.importorskip("openenv.core.env_server", reason='needs pip install "gemgym[openenv]"')
    from gemgym.errors import EnvLostError, ServerFullError
    from gemgym.integrations.openenv import OpenEnvEnv
    from gemgym.integrations.openenv_pool import EndpointPool

    with served(max_sessions=1) as (url_a, _), served(max_sessions=1) as (url_b, _):
        pool = EndpointPool([url_a, url_b])
        first, second, third = OpenEnvEnv(pool), OpenEnvEnv(pool), OpenEnvEnv(pool)
        first.reset(seed=1)
        second.reset(seed=2)  # one session on each server: both full
        with pytest.raises(ServerFullError) as err:
            third.reset(seed=3)
        message = str(err.value)
        assert isinstance(err.value, EnvLostError)  # the engine records stage "env"
        assert message.startswith("every server of the pool is full")
        assert f"{url_a}: RuntimeError: Server error: server full: 1 of 1 sessions" in message
        assert f"{url_b}: RuntimeError: Server error: server full: 1 of 1 sessions" in message
        assert "--max-sessions" in message and "start the servers" not in message
        status = pool.status()
        assert [(e["up"], e["full"], e["sessions"]) for e in status] == [(True, True, 1)] * 2
        # a slot frees up: the next reset plays there at once, and the pool is not full any more
        second.close()
        obs, _ = third.reset(seed=3)
        assert "Guess" in obs
        assert [e["sessions"] for e in pool.status()] == [1, 1]
        assert not pool.status()[1]["full"]
        first.close()
        third.close()
    # a client over its per-client cap is told so, as "full" too
    with served(max_sessions=4, max_client_sessions=1) as (url, _):
        one, two = OpenEnvEnv(url), OpenEnvEnv(url)
        one.reset(seed=1)
        with pytest.raises(ServerFullError, match=r"too many sessions from 127\.0\.0\.1: 1 of 1"):
            two.reset(seed=2)
        one.close()
        two.close()


def test_stateless_resets_beyond_the_limit_get_503_retry_after() -> None:
    with served("serving-test:Slow-v0", max_stateless=1) as (url, _):
        results: list[httpx.Response] = []
        threads = [
            threading.Thread(
                target=lambda: results.append(httpx.post(f"{url}/reset", json={}, timeout=30))
            )
            for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = [r for r in results if r.status_code == 503]
        assert busy and all(r.headers["retry-after"] == "1" for r in busy)
        assert "server busy" in busy[0].json()["error"]
        assert any(r.status_code == 200 for r in results)


# -- startup and metrics ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--env-kwargs", '{"no_such_kwarg": 1}'], "no_such_kwarg"),
        (["--env-kwargs", "[1]"], "must be a JSON object"),
        (["--max-sessions", "0"], "max_sessions"),
    ],
)
def test_serving_is_printed_only_once_the_env_builds(args: list[str], error: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gemgym", "serve", GUESS, "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert proc.returncode == 2, proc.stderr
    assert "serving" not in proc.stdout
    assert error in proc.stderr and "Traceback" not in proc.stderr


def test_a_busy_port_fails_before_serving_is_printed() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "gemgym", "serve", GUESS, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": SRC},
        )
    assert proc.returncode == 2 and "serving" not in proc.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "pick another port (--port)" in proc.stderr


def test_health_and_prometheus_metrics(guess_server: str) -> None:
    assert httpx.post(f"{guess_server}/reset", content=b"{").status_code == 400  # a rejection
    with _ws(guess_server) as ws:
        _ask(ws, {"type": "reset", "data": {"seed": 4}})
        for guess in ("\\boxed{1}", "\\boxed{2}"):
            _ask(ws, {"type": "step", "data": {"message": guess}})
        health = httpx.get(f"{guess_server}/health").json()
        assert health["status"] == "healthy" and health["sessions"] == 1
        text = httpx.get(f"{guess_server}/metrics").text
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(lines["gemgym_serve_steps_total"]) >= 2
    assert float(lines['gemgym_serve_sessions{kind="ws"}']) == 1
    assert float(lines["gemgym_serve_step_latency_seconds_count"]) >= 2
    assert float(lines['gemgym_serve_step_latency_seconds_bucket{le="+Inf"}']) >= 2
    assert float(lines["gemgym_serve_steps_per_second"]) >= 0
    assert float(lines["process_resident_memory_bytes"]) > 0
    assert float(lines['gemgym_serve_rejections_total{reason="bad_request"}']) >= 1


def test_steps_per_second_is_the_rate_over_the_last_ten_whole_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gemgym.serving import stack

    clock = [100.2]
    monkeypatch.setattr(stack.time, "monotonic", lambda: clock[0])
    metrics = stack.Metrics("t", histogram="lat", help_histogram="h", rate_of="steps")
    metrics.inc("steps", 30)
    clock[0] = 101.7
    metrics.inc("steps", 20)
    assert metrics.rate() == 3.0  # the second now running does not count yet
    clock[0] = 102.5
    assert metrics.rate() == 5.0
    assert "t_steps_per_second 5\n" in metrics.render()
    clock[0] = 111.9
    assert metrics.rate() == 2.0  # second 100 has left the window
    clock[0] = 112.0
    assert metrics.rate() == 0.0
