"""``gemgym eval`` overhead: episodes/s against a chat server that answers instantly.

The server (``tests/helpers/scripted_server.py``, a separate process) answers every request
at once with ``\\boxed{5}``; on ``game:GuessTheNumber-v0-easy`` (1-10, 4 turns) that is a whole
episode of up to 4 requests. The run is ``gemgym eval`` itself (``cli.main``, quiet), writing
its records, summary and reports, so what is measured is the harness: HTTP client, env steps,
records. "playing" is the rate while episodes are played (``last_session`` of summary.json);
"whole command" adds start-up, planning and the reports (matplotlib charts). The baseline in the same run is the oracle agent (no HTTP), so the ratio is what the
requests cost.

On a shared machine the wall-clock rates depend on how much CPU the harness gets, so the
benchmark also prints episodes per CPU-second of the harness process (and the load average):
that is what the harness would sustain with a core of its own.

``--client`` measures the chat agent over other HTTP clients, back to back in the same run (in
turn, ``--repeats`` rounds): ``aiohttp`` (gemgym's, :mod:`gemgym._http`), ``httpx`` and
``streams`` (the hand-written HTTP/1.1 client on asyncio streams gemgym used before; both in
``benchmarks/_http_alternatives.py``).

Run: ``.venv/bin/python benchmarks/eval.py [--tasks 4000] [--concurrency 64]
[--client aiohttp,httpx,streams] [--repeats 1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _http_alternatives import CLIENTS
from _testkit import SCRIPTED_SERVER, free_port, wait_for_port

import gemgym.evaluation.agents as chat_agents
from gemgym.cli import main

ENV = "game:GuessTheNumber-v0-easy"


def _run(out: Path, args: list[str]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    status = main(["eval", ENV, "--quiet", "--out", str(out), *args])
    wall = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError(f"gemgym eval exited {status}")
    summary = json.loads((out / "summary.json").read_text())
    return wall, summary


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main_() -> None:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--tasks", type=int, default=4000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--client", default="aiohttp", help="comma-separated: aiohttp, httpx, streams")
    p.add_argument("--repeats", type=int, default=1)
    a = p.parse_args()
    clients = a.client.split(",")
    for name in clients:
        if name != "aiohttp" and name not in CLIENTS:
            p.error(f"unknown client {name!r}")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, SCRIPTED_SERVER, "--port", str(port),
         "--reply", "\\boxed{5}"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    common = ["--tasks", str(a.tasks), "--concurrency", str(a.concurrency)]
    http = ["--agent", "openai", "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1"]
    rows: list[tuple[str, Any, float, int, float]] = []
    default = chat_agents.AsyncClient
    try:
        wait_for_port(port, process=server, timeout_s=20, what="the scripted server")
        with tempfile.TemporaryDirectory() as tmp:
            wall_o, summary_o = _run(Path(tmp) / "oracle", ["--agent", "oracle", *common])
            for r in range(a.repeats):
                for name in clients:
                    chat_agents.AsyncClient = default if name == "aiohttp" else CLIENTS[name]
                    out = Path(tmp) / f"{name}-{r}"
                    server_cpu0 = _cpu(server.pid)
                    try:
                        wall, summary = _run(out, [*http, *common])
                    finally:
                        chat_agents.AsyncClient = default
                    server_cpu = _cpu(server.pid) - server_cpu0
                    records = [json.loads(x) for x in (out / "episodes.jsonl").open()]
                    requests = sum(int(rec["requests"]) for rec in records)
                    errors = summary["summary"]["overall"]["errors"]
                    if errors:
                        raise RuntimeError(f"{name}: {errors} episodes failed")
                    rows.append((name, summary["run"]["last_session"], wall, requests, server_cpu))
    finally:
        server.terminate()
        server.wait(10)
    n = a.tasks
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    so = summary_o["run"]["last_session"]
    print(f"{ENV}, {n} episodes, concurrency {a.concurrency}; load average {load} (at the end)")
    print(
        "                  episodes/s   episodes per     episodes/s    requests/s   server CPU\n"
        "                  (playing)    CPU-second of    (whole                     s/1000 req\n"
        "                               the harness      command)"
    )
    print(
        f"  {'oracle (no HTTP)':16s}{n / so['seconds']:10.1f}  {n / so['cpu_seconds']:14.1f}   {n / wall_o:12.1f}"
    )
    for name, s, wall, requests, server_cpu in rows:
        print(
            f"  {'openai, ' + name:16s}{n / s['seconds']:10.1f}  {n / s['cpu_seconds']:14.1f}   "
            f"{n / wall:12.1f}  {requests / s['seconds']:12.1f}  {1000 * server_cpu / requests:10.3f}"
        )
    print(f"  ({rows[0][3] / n:.2f} requests per episode, 0 errors)")


if __name__ == "__main__":
    main_()
