"""Search and MCP tool speed: index build, search latency (in-process and via the server), MCP calls.

Measured in one run, each with a baseline from the same run:

* **Index build** on a generated 10k-document corpus (3-6 sentences drawn at random from the
  shipped standard-library corpus, so the vocabulary is real English): BM25 (bm25s) and dense
  (MiniLM-L6 + faiss; a 300-document subset with ``--quick``, 2k otherwise: embedding is the cost).
* **Search latency**, one query at a time, median and p90:
  ``Retriever.search`` (the in-process baseline), ``SearchTool(retriever=...)``, and
  ``SearchTool(url=...)`` through ``RetrievalServer`` on loopback (HTTP + JSON on top); plus
  server throughput with 8 client threads, and dense query latency.
* **MCP over stdio** with the shipped example server: connect (start the server, initialise,
  list tools), then ``calculate`` calls through ``MCPTool.execute`` against the raw SDK
  (``mcp.Client.call_tool`` in one asyncio loop, the baseline), and GEM's pattern of opening a
  new session for every call (its ``MCPTool`` enters ``async with client`` per call, which for
  stdio starts a new server process each time).

Latencies are wall-clock (they include other processes: the server, the MCP subprocess). The
machine has 2 shared cores: figures taken while others work are noisy.

Run: ``.venv/bin/python benchmarks/tools.py [--quick] [--docs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gemgym.retrieval import (
    BM25Retriever,
    DenseRetriever,
    Document,
    RetrievalServer,
    load_corpus,
    load_qa,
    sample_corpus_path,
    sample_qa_path,
)
from gemgym.tools.search import SearchTool

EXAMPLE = [sys.executable, "-m", "gemgym.tools.mcp_servers.example"]


def generated_corpus(n: int, seed: int = 0) -> list[Document]:
    """``n`` documents of 3-6 real sentences each, drawn from the shipped corpus."""
    sentences = [
        s.strip()
        for d in load_corpus(sample_corpus_path())
        for s in re.split(r"(?<=[.!?])\s+", d.text)
        if len(s.split()) >= 5
    ]
    rng = random.Random(seed)
    return [
        Document(str(i), f"doc {i}", " ".join(rng.choices(sentences, k=rng.randint(3, 6))))
        for i in range(n)
    ]


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def stats_ms(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples) * 1e3, samples[int(0.9 * (len(samples) - 1))] * 1e3


def row(name: str, samples: list[float], base: float | None = None) -> dict[str, Any]:
    med, p90 = stats_ms(samples)
    ratio = "" if base is None else f"{med / base:6.2f}x"
    print(f"  {name:<44} median {med:8.3f} ms   p90 {p90:8.3f} ms  {ratio}")
    return {"name": name, "median_ms": med, "p90_ms": p90}


def bench_search(args: argparse.Namespace, results: dict[str, Any]) -> None:
    print(f"Search ({args.docs} generated documents)")
    docs = generated_corpus(args.docs)
    start = time.perf_counter()
    bm25 = BM25Retriever(docs)
    build = time.perf_counter() - start
    print(f"  BM25 index build: {build:.2f} s ({args.docs / build:,.0f} docs/s)")
    results["bm25_build_s"] = build

    queries = [q["question"] for q in load_qa(sample_qa_path())]
    queries += [d.text.split(". ")[0] for d in random.Random(1).sample(docs, 60)]
    it = iter(queries * 100)
    n = len(queries) if args.quick else 3 * len(queries)

    def q() -> str:
        return next(it)

    base = timed(lambda: bm25.search(q(), 3), n)
    base_med = stats_ms(base)[0]
    results["bm25_search"] = row("Retriever.search (in-process, baseline)", base)
    local = SearchTool(retriever=bm25)
    results["tool_local"] = row(
        "SearchTool(retriever=...).execute",
        timed(lambda: local.execute(local.parse(f"<search>{q()}</search>")), n),  # type: ignore[arg-type]
        base_med,
    )
    with RetrievalServer(bm25) as server:
        remote = SearchTool(server.url)
        results["tool_server"] = row(
            "SearchTool(url=...).execute via the server",
            timed(lambda: remote.execute(remote.parse(f"<search>{q()}</search>")), n),  # type: ignore[arg-type]
            base_med,
        )
        per_thread = n // 4
        errors: list[str] = []

        def client() -> None:
            tool = SearchTool(server.url, timeout=30)
            for query in queries[:per_thread]:
                if not tool.execute(tool.parse(f"<search>{query}</search>")).ok:  # type: ignore[arg-type]
                    errors.append(query)

        threads = [threading.Thread(target=client) for _ in range(8)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        qps = 8 * per_thread / elapsed
        print(f"  server throughput, 8 client threads: {qps:,.0f} queries/s ({len(errors)} errors)")
        results["server_qps_8_threads"] = qps

    dense_n = 300 if args.quick else 2000
    start = time.perf_counter()
    dense = DenseRetriever(docs[:dense_n])
    build = time.perf_counter() - start
    print(f"  dense index build, {dense_n} docs (model load included): {build:.1f} s")
    results["dense_build_s"] = {"docs": dense_n, "seconds": build}
    results["dense_search"] = row(
        "DenseRetriever.search (embed query + faiss)",
        timed(lambda: dense.search(q(), 3), max(20, n // 4)),
        base_med,
    )


def bench_mcp(args: argparse.Namespace, results: dict[str, Any]) -> None:
    from mcp import Client, StdioServerParameters

    from gemgym.tools.mcp import MCPTool

    print("MCP over stdio (shipped example server)")
    n = 100 if args.quick else 300
    start = time.perf_counter()
    tool = MCPTool.from_command(EXAMPLE[0], EXAMPLE[1:])
    connect = time.perf_counter() - start
    print(f"  MCPTool connect (start server, initialise, list tools): {connect:.2f} s")
    results["mcp_connect_s"] = connect
    action = '<tool_call>{"name": "calculate", "arguments": {"expression": "6 * 7"}}</tool_call>'

    async def raw_sdk() -> list[float]:
        params = StdioServerParameters(command=EXAMPLE[0], args=EXAMPLE[1:])
        async with Client(params) as client:
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                await client.call_tool("calculate", {"expression": "6 * 7"})
                out.append(time.perf_counter() - t0)
            return out

    base = asyncio.run(raw_sdk())
    base_med = stats_ms(base)[0]
    results["mcp_sdk_call"] = row("mcp.Client.call_tool (raw SDK, baseline)", base)
    results["mcp_tool_call"] = row(
        "MCPTool.execute (parse + call + format)",
        timed(lambda: tool.execute(tool.parse(action)), n),  # type: ignore[arg-type]
        base_med,
    )
    tool.close()

    async def session_per_call() -> None:
        params = StdioServerParameters(command=EXAMPLE[0], args=EXAMPLE[1:])
        async with Client(params) as client:
            await client.call_tool("calculate", {"expression": "6 * 7"})

    results["mcp_gem_style_call"] = row(
        "new session per call (GEM's MCPTool pattern)",
        timed(lambda: asyncio.run(session_per_call()), 3),
        base_med,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (< 2 minutes)")
    parser.add_argument("--docs", type=int, default=10_000, help="corpus size (default 10k)")
    parser.add_argument("--skip-mcp", action="store_true")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results: dict[str, Any] = {"quick": args.quick}
    bench_search(args, results)
    if not args.skip_mcp:
        bench_mcp(args, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
