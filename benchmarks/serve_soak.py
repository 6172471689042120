"""Soak: many OpenEnv clients stepping one ``gemgym serve`` for minutes; the server's memory must
stay flat and no client may see an error.

The server is ``gemgym serve game:GuessTheNumber-v0-hard`` in its own process; the clients are
OpenEnv's own async ``GenericEnvClient`` sessions on one event loop (``--clients`` of them, each
its own WebSocket session), stepping random guesses and resetting when an episode ends. Every
``--every`` seconds it prints the server's RSS and the steps/s since the last line; at the end,
RSS at the start of the load (after the first interval) and at the end, steps/s, p50/p99 step
latency and the errors.

Run: ``.venv/bin/python benchmarks/serve_soak.py --clients 64 --minutes 10`` (the full soak;
``--minutes 3`` for a shorter one). Needs ``pip install "gemgym[openenv]"``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

from _serve_common import Load, drive, rss_mib, server_process
from _testkit import free_port

ENV = "game:GuessTheNumber-v0-hard"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between report lines")
    args = ap.parse_args()
    rng = random.Random(0)
    actions = [f"\\boxed{{{rng.randint(1, 50)}}}" for _ in range(997)]
    port = free_port()
    serve_args = [ENV, "--max-sessions", str(args.clients)]
    with server_process("gemgym", port, *serve_args) as proc:
        url = f"http://127.0.0.1:{port}"
        start_rss = rss_mib(proc.pid)
        print(
            f"{ENV}: {args.clients} clients x {args.minutes:g} min; server RSS {start_rss:.1f} MiB"
        )
        load = Load()
        samples: list[tuple[float, float, float]] = []  # (elapsed s, rss MiB, steps/s)

        async def watch(t_end: float) -> None:
            last_n, last_t, t0 = 0, time.perf_counter(), time.perf_counter()
            while time.perf_counter() < t_end:
                await asyncio.sleep(min(args.every, max(0.0, t_end - time.perf_counter())))
                now = time.perf_counter()
                n = len(load.latencies)
                rate = (n - last_n) / (now - last_t)
                last_n, last_t = n, now
                rss = rss_mib(proc.pid)
                samples.append((now - t0, rss, rate))
                print(
                    f"  {now - t0:6.0f} s  RSS {rss:7.1f} MiB  {rate:8.0f} steps/s  "
                    f"errors {len(load.errors)}",
                    flush=True,
                )

        async def run() -> None:
            seconds = args.minutes * 60
            t_end = time.perf_counter() + seconds
            await asyncio.gather(
                drive(url, args.clients, seconds, actions, load=load), watch(t_end)
            )

        asyncio.run(run())
        end_rss = rss_mib(proc.pid)
    first = samples[0][1] if samples else start_rss
    load_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"steps {len(load.latencies):,} in {load.seconds:.0f} s: {load.steps_per_s:,.0f} steps/s, "
        f"p50 {load.p50_ms:.2f} ms, p99 {load.pct(99) * 1000:.2f} ms; load average {load_avg}"
    )
    print(
        f"server RSS: {start_rss:.1f} MiB idle, {first:.1f} MiB after {samples[0][0] if samples else 0:.0f} s "
        f"of load, {end_rss:.1f} MiB at the end (drift {end_rss - first:+.1f} MiB); "
        f"errors: {len(load.errors)}"
    )
    for error in load.errors[:10]:
        print("  ", error)


if __name__ == "__main__":
    main()
