"""``gemgym serve-retriever`` under abuse (issue 44): idle connections cost no thread and are
closed, oversized, malformed and deeply nested bodies are 4xx, a JSON client gets JSON errors,
tokens are enforced, and a busy server answers 503 with Retry-After."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

pytest.importorskip("uvicorn", reason='needs pip install "gemgym[serve]"')
msgpack = pytest.importorskip("msgpack", reason='needs pip install "gemgym[search]"')

import httpx  # noqa: E402

from gemgym.retrieval import BM25Retriever, RetrievalServer, load_corpus, sample_corpus_path  # noqa: E402
from gemgym.retrieval.index import Hit, Retriever  # noqa: E402
from gemgym.serving import Limits  # noqa: E402
from helpers.net import gemgym_server, post_streamed, rss_kib  # noqa: E402


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever(load_corpus(sample_corpus_path())[:200])


@pytest.fixture(scope="module")
def server(bm25: BM25Retriever) -> Iterator[RetrievalServer]:
    limits = Limits(max_body_bytes=1024 * 1024, header_timeout_s=0.5)
    with RetrievalServer(bm25, limits=limits) as s:
        yield s


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        parts = []
        while piece := s.recv(65536):
            parts.append(piece)
    return b"".join(parts)


def test_idle_connections_cost_no_thread_and_are_closed(server: RetrievalServer) -> None:
    before = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(500)]
    assert threading.active_count() == before  # not one thread per connection
    started = time.monotonic()
    for s in socks:
        s.settimeout(5)
        assert s.recv(16) == b""  # the server closed it
        s.close()
    assert time.monotonic() - started < 3.0
    r = httpx.post(server.url, json={"queries": ["heap"], "topk": 1})
    assert r.status_code == 200


def test_an_oversized_body_is_413_in_json(server: RetrievalServer) -> None:
    r = httpx.post(server.url, content=b"x" * (5 * 1024 * 1024))
    assert r.status_code == 413 and "larger than this server takes" in r.json()["error"]


def test_a_300_mib_body_is_413_and_the_server_memory_stays_flat() -> None:
    """The abuse as found: a 300 MiB body was accepted. With the default 8 MiB limit it is
    read and dropped (so the client reads the 413), and the server's RSS barely moves."""
    with gemgym_server("serve-retriever", "--sample", "--quiet") as server:
        url = f"{server.url}/retrieve"
        assert httpx.post(url, json={"queries": ["heap"], "topk": 1}).status_code == 200  # warm
        before = rss_kib(server.proc.pid)
        answer = post_streamed(server.port, "/retrieve", 300 * 1024 * 1024)
        grown = rss_kib(server.proc.pid) - before
        assert answer.startswith("HTTP/1.1 413"), answer[:200]
        assert "application/json" in answer and "larger than this server takes" in answer
        assert grown < 20 * 1024, f"server RSS grew {grown} KiB"
        assert httpx.post(url, json={"queries": ["heap"], "topk": 1}).status_code == 200


def test_serving_is_printed_only_once_the_port_is_bound() -> None:
    """A busy port, or a public address without a token, fails with a one-line error naming
    the flag, before anything says it is serving."""
    cmd = [sys.executable, "-m", "gemgym", "serve-retriever", "--sample"]
    env = {k: v for k, v in os.environ.items() if k != "GEMGYM_SERVE_TOKEN"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [*cmd, "--port", str(port)], capture_output=True, text=True, timeout=120, env=env
        )
    assert busy.returncode == 2 and "serving" not in busy.stdout + busy.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    assert "pick another port (--port)" in busy.stderr and "Traceback" not in busy.stderr
    public = subprocess.run(
        [*cmd, "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert public.returncode == 2 and "serving" not in public.stdout + public.stderr
    assert "refusing to serve on 0.0.0.0 without a token" in public.stderr
    assert "Pass a token (--token)" in public.stderr and "(--insecure)" in public.stderr
    with gemgym_server("serve-retriever", "--sample", "--quiet") as server:  # says where
        assert server.proc.stdout is not None
        line = server.proc.stdout.readline()
        assert line.startswith("serving") and f"127.0.0.1:{server.port}" in line, line


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: twelve\r\n\r\n{}",
        b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
        b"POST /retrieve HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_malformed_framing_is_a_400_not_a_dropped_connection(
    server: RetrievalServer, request_bytes: bytes
) -> None:
    assert _raw(server.port, request_bytes).startswith(b"HTTP/1.1 400")


def test_deeply_nested_json_is_a_400(server: RetrievalServer) -> None:
    for body in (b"[" * 200_000, b'{"queries": ' + b"[" * 100 + b"]" * 100 + b"}"):
        r = httpx.post(server.url, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "nests deeper than 64" in r.json()["error"]


def test_a_json_client_gets_json_errors_and_a_msgpack_client_msgpack(
    server: RetrievalServer,
) -> None:
    for ctype in ("application/json", "application/octet-stream", None):
        headers = {"content-type": ctype} if ctype else {}
        r = httpx.post(server.url, content=b"\xc1 neither", headers=headers)
        assert r.status_code == 400
        assert r.headers["content-type"] == "application/json"
        assert "not valid JSON" in r.json()["error"]
    # a client that sends MessagePack gets its error in MessagePack (GEM's mosec clients)
    mp = {"content-type": "application/msgpack"}
    r = httpx.post(server.url, content=msgpack.packb({"topk": 3}), headers=mp)
    assert r.status_code == 400 and r.headers["content-type"] == "application/msgpack"
    assert "queries" in msgpack.unpackb(r.content)["error"]
    # ... unless it asks for JSON
    r = httpx.post(server.url, content=b"\xc1", headers={**mp, "accept": "application/json"})
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    body = msgpack.packb({"queries": ["heap"], "topk": 1})
    r = httpx.post(server.url, content=body, headers={**mp, "accept": "application/json"})
    assert r.status_code == 200 and len(r.json()["result"]) == 1


def test_without_the_token_requests_are_401(bm25: BM25Retriever) -> None:
    with RetrievalServer(bm25, token="t0k") as s:
        r = httpx.post(s.url, json={"queries": ["heap"]})
        assert r.status_code == 401 and "Bearer" in r.json()["error"]
        assert httpx.get(f"http://127.0.0.1:{s.port}/metrics").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{s.port}/health").status_code == 200
        ok = httpx.post(s.url, json={"queries": ["heap"]}, headers={"authorization": "Bearer t0k"})
        assert ok.status_code == 200
        assert httpx.post(f"{s.url}?token=t0k", json={"queries": ["heap"]}).status_code == 200


class SlowRetriever(Retriever):
    backend = "slow"

    def _search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        time.sleep(0.5)
        return [[Hit(self.documents[0], 1.0)] for _ in queries]


def test_a_busy_server_answers_503_with_retry_after(bm25: BM25Retriever) -> None:
    slow = SlowRetriever(bm25.documents[:3])
    with RetrievalServer(slow, threads=1, max_pending=2, max_client_pending=2) as s:
        results: list[httpx.Response] = []

        def ask() -> None:
            results.append(httpx.post(s.url, json={"queries": ["x"]}, timeout=30))

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = [r.status_code for r in results]
        assert 200 in codes and set(codes) <= {200, 429, 503}
        refused = [r for r in results if r.status_code != 200]
        assert refused and all(r.headers["retry-after"] == "1" for r in refused)
        text = httpx.get(f"http://127.0.0.1:{s.port}/metrics").text
    assert 'gemgym_retriever_rejections_total{reason="' in text
    assert 'gemgym_retriever_requests_total{code="200"}' in text
    assert "gemgym_retriever_request_latency_seconds_count" in text


def test_one_client_cannot_take_every_search_slot(bm25: BM25Retriever) -> None:
    slow = SlowRetriever(bm25.documents[:3])
    with RetrievalServer(slow, threads=1, max_pending=50, max_client_pending=1) as s:
        results: list[httpx.Response] = []
        threads = [
            threading.Thread(
                target=lambda: results.append(httpx.post(s.url, json={"queries": ["x"]}))
            )
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [r for r in results if r.status_code == 429]
        assert refused and "too many requests at once from 127.0.0.1" in refused[0].json()["error"]


def test_health_and_prometheus_metrics(bm25: BM25Retriever) -> None:
    with RetrievalServer(bm25) as s:
        base = f"http://127.0.0.1:{s.port}"
        health = httpx.get(f"{base}/health").json()
        assert health["status"] == "ok" and health["backend"] == "bm25"
        assert health["documents"] == len(bm25)
        assert httpx.post(s.url, json={"queries": ["heap", "sort"], "topk": 1}).status_code == 200
        assert httpx.post(s.url, content=b"{").status_code == 400
        text = httpx.get(f"{base}/metrics").text
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(lines["gemgym_retriever_queries_total"]) == 2
    assert float(lines['gemgym_retriever_requests_total{code="200"}']) == 1
    assert float(lines['gemgym_retriever_rejections_total{reason="bad_request"}']) == 1
    assert float(lines["gemgym_retriever_request_latency_seconds_count"]) == 2
    assert float(lines['gemgym_retriever_request_latency_seconds_bucket{le="+Inf"}']) == 2
    assert float(lines["gemgym_retriever_queries_per_second"]) >= 0
    assert float(lines["gemgym_retriever_pending"]) == 0
    assert float(lines["process_resident_memory_bytes"]) > 0


def test_kept_alive_searches_are_not_held_back_by_nagle(bm25: BM25Retriever) -> None:
    """A kept-alive client's searches answer in about a millisecond, not Nagle's ~40 ms."""
    import time

    from gemgym.tools.search import SearchTool

    with RetrievalServer(bm25) as srv:
        tool = SearchTool(srv.url)
        call = tool.parse("<search>heap queue</search>")
        assert call is not None
        tool.execute(call)  # connect
        took = []
        for _ in range(20):
            started = time.perf_counter()
            assert "<information>" in tool.execute(call).observation
            took.append(time.perf_counter() - started)
        tool.close()
    assert sorted(took)[len(took) // 2] < 0.030
