"""Vector env throughput: env-steps/s of every backend, with ratios measured in the same run.

Run ``.venv/bin/python benchmarks/vector.py`` (``--quick`` for N = 8 and 64 with shorter runs).

Envs: ``game:GuessTheNumber-v0-hard`` (the cheapest game), ``game:Sudoku-v0-easy``, and the two
synthetic envs of ``tests/helpers/envs.py``: ``bench:CpuBound-v0`` (about 200 µs of
pure-Python work per step) and ``bench:Sleep-v0`` (sleeps 20 ms per step).

Columns (env-steps/s, only the stepping is timed; autoreset is SAME_STEP, so resets are counted):

* ``loop``: a plain Python loop calling ``env.step`` (and ``env.reset`` when an episode ends) on N
  envs made with :func:`gemgym.make`: the baseline for the ``sync`` overhead;
* ``sync``, ``thread``, ``process`` (2 worker processes): ``venv.step(actions)``;
* ``asyncio``: ``await venv.astep(actions)`` on the ``sync`` backend (each env's own ``astep``).

Actions are drawn beforehand with each env's ``sample_random_action`` (a pool per env id).

Two more modes, on ``game:GuessTheNumber-v0-hard`` (the cheapest game, where the backend's own
costs show most):

* ``--options``: the ``process`` backend's message options, µs per batch at N = 8, 64, 256
  (``process``/``sync`` in brackets): ``sync``; pipes (``shared_memory=False``) without and with
  busy polling (``busy_poll=0`` and the default 1 ms); shared memory (the default on Linux x86)
  with 2 workers and with 1. The configurations alternate within each round; each cell is the
  median of ``--rounds`` rounds. Also a bare round trip of a 100-byte message to an echoing
  worker through a pipe.
* ``--breakdown``: where a ``sync`` step's time goes at N = 8, each as a share of the plain
  loop's rate: the envs stepped with their resets and the result columns built (the backend's
  env group, below the array layer), then the whole ``venv.step`` (plus the numpy arrays the
  API returns). Median of ``--rounds`` rounds, alternated.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _testkit import CpuBoundEnv, register_bench_envs

import gemgym
from gemgym.vector import VectorEnv

register_bench_envs()

ENVS = [
    "game:GuessTheNumber-v0-hard",
    "game:Sudoku-v0-easy",
    "bench:CpuBound-v0",
    "bench:Sleep-v0",
]
COLUMNS = ["loop", "sync", "thread", "process", "asyncio"]
REPEATS = 3


def action_pool(env_id: str, size: int = 64) -> list[Any]:
    env = gemgym.make(env_id)
    env.reset(seed=0)
    pool = [env.sample_random_action() for _ in range(size)]
    env.close()
    return pool


def timed(step: Callable[[int], None], budget: float, repeats: int = REPEATS) -> tuple[int, float]:
    """Call ``step(k)`` for ``budget`` seconds in ``repeats`` rounds (at least once each);
    return the steps and time of the fastest round (the least disturbed by other processes)."""
    best: tuple[int, float] | None = None
    k = 0
    for _ in range(repeats):
        start_k, t0 = k, time.perf_counter()
        while True:
            step(k)
            k += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= budget / repeats:
                break
        if best is None or (k - start_k) / elapsed > best[0] / best[1]:
            best = (k - start_k, elapsed)
    assert best is not None
    return best


def action_batches(pool: list[Any], n: int) -> list[list[Any]]:
    """Batch ``k`` gives env ``i`` the action ``pool[(k + i) % len(pool)]``: the same actions
    for the loop and every backend, made before the timing."""
    m = len(pool)
    return [[pool[(k + i) % m] for i in range(n)] for k in range(m)]


def run_loop(env_id: str, n: int, pool: list[Any], budget: float) -> float:
    envs = [gemgym.make(env_id) for _ in range(n)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    batches = action_batches(pool, n)
    m = len(batches)

    def step(k: int) -> None:
        for env, action in zip(envs, batches[k % m], strict=True):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()

    steps, elapsed = timed(step, budget)
    for e in envs:
        e.close()
    return steps * n / elapsed


def run_vec(env_id: str, n: int, column: str, pool: list[Any], budget: float) -> float:
    backend = {"asyncio": "sync"}.get(column, column)
    opts = {"num_workers": 2} if backend == "process" else {}
    venv: VectorEnv = gemgym.make_vec(env_id, n, backend=backend, backend_options=opts)
    venv.reset(seed=0)
    batches = action_batches(pool, n)
    m = len(batches)
    try:
        if column == "asyncio":

            async def main() -> tuple[int, float]:
                best = (0, 1.0)
                for _ in range(REPEATS):  # as timed(): the fastest round
                    k, t0 = 0, time.perf_counter()
                    while True:
                        await venv.astep(batches[k % m])
                        k += 1
                        elapsed = time.perf_counter() - t0
                        if elapsed >= budget / REPEATS:
                            break
                    if k / elapsed > best[0] / best[1]:
                        best = (k, elapsed)
                return best

            steps, elapsed = asyncio.run(main())
        else:
            steps, elapsed = timed(lambda k: venv.step(batches[k % m]), budget)
    finally:
        venv.close()
    return steps * n / elapsed


def _spin(n: int) -> float:
    """Pure-Python work; returns its own duration."""
    t0 = time.perf_counter()
    s = 0
    for i in range(n):
        s += i * i % 7
    return time.perf_counter() - t0


def _echo(conn: Any) -> None:
    while True:
        msg = conn.recv_bytes()
        if not msg:
            break
        conn.send_bytes(msg)


def two_process_ceiling(work: int = 2_000_000) -> float:
    """The throughput of two processes doing pure-Python work at once relative to one (2.0 on
    two free cores): the ceiling of ``process``/``sync`` with 2 workers, measured now."""
    import multiprocessing as mp

    one = min(_spin(work) for _ in range(3))
    with mp.get_context("forkserver").Pool(2) as pool:
        two = min(max(pool.map(_spin, [work, work])) for _ in range(3))
    return 2 * one / two


def pipe_round_trip(trips: int = 3000) -> float:
    """The round trip of a 100-byte message to an echoing worker process through a pipe, µs."""
    import multiprocessing as mp

    ctx = mp.get_context("forkserver")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_echo, args=(child,), daemon=True)
    proc.start()
    msg = b"x" * 100
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(trips):
            parent.send_bytes(msg)
            parent.recv_bytes()
        best = min(best, (time.perf_counter() - t0) / trips)
    parent.send_bytes(b"")
    proc.join(5)
    return best * 1e6


OPTION_ENV = "game:GuessTheNumber-v0-hard"
OPTIONS: dict[str, dict[str, Any]] = {
    "pipes, busy_poll=0": {"num_workers": 2, "shared_memory": False, "busy_poll": 0.0},
    "pipes": {"num_workers": 2, "shared_memory": False},
    "shared memory": {"num_workers": 2},
    "shared memory, 1 worker": {"num_workers": 1},
}


def _batch_us(venv: VectorEnv, batches: list[list[Any]], budget: float) -> float:
    """µs per ``venv.step`` of one batch, over ``budget`` seconds."""
    m, k = len(batches), 0
    for k in range(20):  # warm up: workers polling, caches filled
        venv.step(batches[k % m])
    k, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < budget:
        venv.step(batches[k % m])
        k += 1
    return (time.perf_counter() - t0) / k * 1e6


def run_options(sizes: list[int], rounds: int, budget: float) -> None:
    """The ``process`` backend's options against ``sync`` (``--options``)."""
    pool = action_pool(OPTION_ENV)
    trip = pipe_round_trip()
    print(f"== process options on {OPTION_ENV}: µs per batch, median of {rounds} rounds ==")
    print(f"bare pipe round trip of 100 bytes to an echoing worker: {trip:.1f} µs")
    names = ["sync", *OPTIONS]
    print(f"{'N':>4} " + " ".join(f"{c:>24}" for c in names))
    for n in sizes:
        batches = action_batches(pool, n)
        venvs: dict[str, VectorEnv] = {"sync": gemgym.make_vec(OPTION_ENV, n, backend="sync")}
        for name, opts in OPTIONS.items():
            venvs[name] = gemgym.make_vec(OPTION_ENV, n, backend="process", backend_options=opts)
        times: dict[str, list[float]] = {name: [] for name in venvs}
        try:
            for venv in venvs.values():
                venv.reset(seed=0)
            for r in range(rounds):
                order = list(venvs) if r % 2 == 0 else list(reversed(venvs))
                for name in order:
                    times[name].append(_batch_us(venvs[name], batches, budget))
        finally:
            for venv in venvs.values():
                venv.close()
        med = {name: statistics.median(t) for name, t in times.items()}
        cells = []
        for name in names:
            if name == "sync":
                cells.append(f"{med[name]:>24.1f}")
            else:
                ratio = med["sync"] / med[name]
                cells.append(f"{f'{med[name]:.1f} ({ratio:.2f})':>24}")
        print(f"{n:>4} " + " ".join(cells), flush=True)


def run_breakdown(n: int, rounds: int, budget: float) -> None:
    """Shares of a ``sync`` step at N = ``n`` (``--breakdown``)."""
    from gemgym.vector.sync import SyncVectorEnv

    pool = action_pool(OPTION_ENV)
    batches = action_batches(pool, n)
    m = len(batches)
    venv = gemgym.make_vec(OPTION_ENV, n, backend="sync")
    if not isinstance(venv, SyncVectorEnv):
        raise SystemExit("--breakdown needs the sync backend")
    venv.reset(seed=0)
    group = venv._group  # the envs and their result columns, below the arrays of the API
    parts: dict[str, Callable[[int], None]] = {
        "envs stepped, resets and columns (the env group)": lambda k: group.columns(batches[k % m]),
        "venv.step (plus the numpy arrays)": lambda k: venv.step(batches[k % m]),
    }
    rates: dict[str, list[float]] = {"loop": [], **{name: [] for name in parts}}
    try:
        for r in range(rounds):
            for name in ("loop", *parts) if r % 2 == 0 else (*reversed(parts), "loop"):
                if name == "loop":
                    rates[name].append(run_loop(OPTION_ENV, n, pool, budget))
                else:
                    steps, elapsed = timed(parts[name], budget, repeats=1)
                    rates[name].append(steps * n / elapsed)
    finally:
        venv.close()
    loop = statistics.median(rates["loop"])
    print(f"== where a sync step's time goes on {OPTION_ENV}, N = {n}: median of {rounds} ==")
    print(f"{'plain loop (env.step, env.reset)':<52} {fmt(loop):>9} env-steps/s  1.000")
    for name in parts:
        rate = statistics.median(rates[name])
        print(f"{name:<52} {fmt(rate):>9} env-steps/s  {rate / loop:.3f}")


def fmt(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 8, 64 and short runs")
    parser.add_argument("--budget", type=float, default=None, help="seconds per measurement")
    parser.add_argument("--envs", nargs="*", default=None, help="env ids (default: all four)")
    parser.add_argument("--options", action="store_true", help="the process backend's options")
    parser.add_argument("--breakdown", action="store_true", help="shares of a sync step, N = 8")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --options/--breakdown")
    args = parser.parse_args()
    if args.options or args.breakdown:
        cell = args.budget if args.budget is not None else 0.3
        if args.options:
            run_options([8, 64] if args.quick else [8, 64, 256], args.rounds, cell)
        if args.breakdown:
            run_breakdown(8, args.rounds, cell)
        return
    sizes = [8, 64] if args.quick else [8, 64, 256]
    budget = args.budget if args.budget is not None else (0.3 if args.quick else 1.0)
    env_ids = [e for e in (args.envs or ENVS) if e in gemgym.list_envs()]
    missing = sorted(set(args.envs or ENVS) - set(env_ids))
    if missing:
        print(f"not registered, skipped: {missing}")

    probe = CpuBoundEnv()
    probe.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(200):
        probe.step("a")
    cost = (time.perf_counter() - t0) / 200 * 1e6
    ceiling, trip = two_process_ceiling(), pipe_round_trip()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"bench:CpuBound-v0 step costs {cost:.0f} µs here; budget {budget}s per cell\n"
        f"machine: 2 processes of pure Python run {ceiling:.2f}x as fast as 1 (the ceiling of "
        f"process/sync with 2 workers); a pipe round trip to a worker takes {trip:.1f} µs"
    )
    header = f"{'env':<28} {'N':>4} " + " ".join(f"{c:>9}" for c in COLUMNS)
    header += "   sync/loop proc/sync thr/sync aio/sync"
    print(header)
    for env_id in env_ids:
        pool = action_pool(env_id)
        sleepy = env_id == "bench:Sleep-v0"
        for n in sizes:
            rates: dict[str, float] = {}
            for col in COLUMNS:
                # the sleeping env in a loop is N x 20 ms per batch: one batch is enough there
                b = 0.0 if sleepy and col in ("loop", "sync", "process") else budget
                if col == "loop":
                    rates[col] = run_loop(env_id, n, pool, b)
                else:
                    rates[col] = run_vec(env_id, n, col, pool, b)
            s = rates["sync"]
            print(
                f"{env_id:<28} {n:>4} "
                + " ".join(f"{fmt(rates[c]):>9}" for c in COLUMNS)
                + f"   {s / rates['loop']:>9.2f} {rates['process'] / s:>9.2f}"
                + f" {rates['thread'] / s:>8.2f} {rates['asyncio'] / s:>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
