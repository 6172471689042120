"""Env steps through an OpenEnv server (``gemgym serve``) against the same env in process.

The server is OpenEnv's own (uvicorn, in a separate process, as ``gemgym serve`` runs it); the
client is :class:`gemgym.integrations.openenv.OpenEnvEnv` (OpenEnv's WebSocket client), one
session per env. Workload: GuessTheNumber-v0-hard episodes with random guesses, resets
included; the baseline in the same run is the in-process env. Reports steps/s for 1 session and
for ``--sessions`` sessions stepped together by a thread vector env.

Run: ``.venv/bin/python benchmarks/env_server.py [--steps 2000] [--sessions 8]``
(needs ``pip install "gemgym[openenv]"``).

``--vs-openenv``: instead, ``gemgym serve`` against OpenEnv's own server (``create_app``), each
hosting the same echo env (OpenEnv's example env from its ``openenv init`` template; the same env
written as a gemgym env), both in their own processes, driven by the same client (OpenEnv's async
``GenericEnvClient``, 1, 16 and 64 sessions on one event loop) in one run, rounds interleaved:
steps/s and p50/p99 step latency per server.
``.venv/bin/python benchmarks/env_server.py --vs-openenv [--seconds 10] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import gemgym

ENV = "game:GuessTheNumber-v0-hard"


def _actions(n: int) -> list[str]:
    rng = random.Random(0)
    return [f"\\boxed{{{rng.randint(1, 50)}}}" for _ in range(n)]


def _play(env: gemgym.Env, actions: list[str]) -> float:
    t0 = time.perf_counter()
    env.reset(seed=0)
    for k, a in enumerate(actions):
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset(seed=k)
    return len(actions) / (time.perf_counter() - t0)


def _play_vector(make: object, n_envs: int, rounds: int) -> float:
    from gemgym.vector import make_vector_env

    venv = make_vector_env(env_fns=[make] * n_envs, backend="thread")  # type: ignore[list-item]
    actions = _actions(rounds)
    venv.reset(seed=0)
    t0 = time.perf_counter()
    for a in actions:
        venv.step([a] * n_envs)  # autoreset: finished episodes start again
    rate = rounds * n_envs / (time.perf_counter() - t0)
    venv.close()
    return rate


def vs_openenv(seconds: float, rounds: int, clients: list[int]) -> None:
    """gemgym serve vs OpenEnv's server, same echo env, same client, one run."""
    import asyncio

    from _serve_common import Load, drive, server_process
    from _testkit import free_port

    actions = [f"hello world {i}" for i in range(101)]
    ports = {"gemgym serve": free_port(), "OpenEnv server": free_port()}
    kinds = {"gemgym serve": "gemgym-echo", "OpenEnv server": "openenv-echo"}
    results: dict[tuple[str, int], Load] = {}
    with (
        server_process(kinds["gemgym serve"], ports["gemgym serve"]),
        server_process(kinds["OpenEnv server"], ports["OpenEnv server"]),
    ):
        for n in clients:
            for r in range(rounds):
                order = list(ports) if r % 2 == 0 else list(reversed(ports))
                for name in order:
                    url = f"http://127.0.0.1:{ports[name]}"
                    load = results.setdefault((name, n), Load())
                    asyncio.run(drive(url, n, seconds, actions, load=load))
    load_avg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"echo env, {rounds} x {seconds:g} s per cell, rounds interleaved; load average {load_avg}"
    )
    print(f"{'clients':>8}  {'server':<16}{'steps/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for n in clients:
        for name in ports:
            load = results[(name, n)]
            print(
                f"{n:>8}  {name:<16}{load.steps_per_s:10,.0f}{load.p50_ms:9.2f}"
                f"{load.pct(99) * 1000:9.2f}{len(load.errors):8}"
            )
        ratio = (
            results[("gemgym serve", n)].steps_per_s / results[("OpenEnv server", n)].steps_per_s
        )
        print(f"{'':8}  gemgym / OpenEnv steps/s: {ratio:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1, help="server processes (gemgym serve)")
    ap.add_argument("--vs-openenv", action="store_true", help="gemgym serve vs OpenEnv's server")
    ap.add_argument("--seconds", type=float, default=10.0, help="per cell with --vs-openenv")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds with --vs-openenv")
    ap.add_argument("--clients", default="1,16,64", help="sessions per cell with --vs-openenv")
    args = ap.parse_args()
    if args.vs_openenv:
        vs_openenv(args.seconds, args.rounds, [int(c) for c in args.clients.split(",")])
        return
    from _testkit import serve_process

    from gemgym.integrations.openenv import OpenEnvEnv

    def command(port: int) -> list[str]:
        serve = ["serve", ENV, "--port", str(port), "--workers", str(args.workers)]
        return [sys.executable, "-m", "gemgym", *serve]

    src = str(Path(__file__).resolve().parents[1] / "src")
    with serve_process(command, env={"PYTHONPATH": src}) as url:  # answers /health
        actions = _actions(args.steps)
        local = _play(gemgym.make(ENV), actions)
        remote_env = OpenEnvEnv(url)
        remote = _play(remote_env, actions)
        remote_env.close()
        rounds = max(1, args.steps // args.sessions)
        vec_local = _play_vector(lambda: gemgym.make(ENV), args.sessions, rounds)
        vec_remote = _play_vector(lambda: OpenEnvEnv(url), args.sessions, rounds)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{ENV}, {args.steps} steps, {args.workers} server process(es); load average {load}")
    print(f"{'':28}{'in process':>14}{'OpenEnv server':>16}{'ratio':>8}")
    print(f"{'1 env, steps/s':28}{local:14,.0f}{remote:16,.0f}{remote / local:8.4f}")
    label = f"{args.sessions} envs (thread), steps/s"
    print(f"{label:28}{vec_local:14,.0f}{vec_remote:16,.0f}{vec_remote / vec_local:8.4f}")


if __name__ == "__main__":
    main()
