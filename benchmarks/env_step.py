"""Single-env speed: steps/s with random actions and reset latency, per env id.

For every id this measures, in the same run:

* steps/s through ``gemgym.make(id)`` (the wrapped env users get), counting every step of
  back-to-back episodes, the resets and ``sample_random_action()`` included (as GEM measured);
* the same loop on ``env.unwrapped`` (the plain-loop baseline), so the wrapper overhead shows;
* reset latency, median and p95, through the wrapped env.

Times are this process's CPU time by default (``time.process_time``): on a shared machine the
wall clock also counts the time other processes hold the cores; on a quiet machine the two agree.
``--wall`` uses the wall clock instead.

Upstream GEM's figures (gem-llm 0.1.0 on the same 2-core machine kind, see
``../shared/reference/GEM.md`` §5) are hard-coded below and printed as ratios. Those were
measured at another time, and this machine kind's speed varies by 2× from one hour to the next,
so the fair comparison is GEM measured in the same run: with ``--gem-python PATH`` (the Python of
a virtualenv with ``pip install gem-llm==0.1.0``) the same loop runs on upstream GEM's env, in a
subprocess, right after each of ours, and the ratio column uses that figure.

Run: ``.venv/bin/python benchmarks/env_step.py [--quick] [--ids ID_OR_PATTERN ...]
[--gem-python /path/to/gem-venv/bin/python]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

import gemgym

# Upstream GEM on the reference machine: steps/s incl. reset and sampling; reset median (s).
GEM_STEPS_PER_S = {
    "game:GuessTheNumber-v0-hard": 284_000.0,
    "game:Wordle-v0-easy": 131_000.0,
    "game:Minesweeper-v0-easy": 44_000.0,
    "game:Sudoku-v0-easy": 24_000.0,
}
GEM_RESET_S = {
    "game:GuessTheNumber-v0-hard": 1.2e-6,
    "game:Wordle-v0-easy": 19e-6,
    "game:Minesweeper-v0-easy": 12e-6,
    "game:Sudoku-v0-easy": 386e-6,
}


CLOCK = time.process_time

# The same loop as steps_per_second, run by upstream GEM's Python (only for envs that have
# GEM's own sample_random_action: GEM's Sudoku and Hanoi lack one, so they are not compared).
_GEM_LOOP = """
import logging, sys, time
logging.disable(logging.CRITICAL)
import gem
env_id, seconds = sys.argv[1], float(sys.argv[2])
env = gem.make(env_id)
env.reset()
sample = env.sample_random_action
sample()
steps = 0
start = time.process_time()
while True:
    for _ in range(64):
        _, _, te, tr, _ = env.step(sample())
        steps += 1
        if te or tr:
            env.reset()
    if time.process_time() - start >= seconds:
        break
print(steps / (time.process_time() - start))
"""


def gem_steps_per_second(python: str, env_id: str, seconds: float) -> float | None:
    """Upstream GEM's steps/s for ``env_id`` measured now, or None when GEM cannot run it."""
    try:
        out = subprocess.run(
            [python, "-c", _GEM_LOOP, env_id, str(seconds)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return float(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def steps_per_second(env: Any, seconds: float, seed: int = 0) -> tuple[float, float]:
    """Play random episodes back to back for ``seconds``; return (steps/s, mean episode length)."""
    env.reset(seed=seed)
    steps = episodes = 0
    sample, step, reset = env.sample_random_action, env.step, env.reset
    clock = CLOCK
    start = clock()
    deadline = start + seconds
    while True:
        for _ in range(64):  # check the clock every 64 steps only
            _, _, terminated, truncated, _ = step(sample())
            steps += 1
            if terminated or truncated:
                episodes += 1
                reset()
        if clock() >= deadline:
            break
    elapsed = clock() - start
    return steps / elapsed, steps / max(episodes, 1)


def reset_latency(env: Any, seconds: float, max_resets: int = 2000) -> tuple[float, float]:
    """Median and p95 of ``reset()`` wall time (seconds)."""
    env.reset(seed=1)
    times: list[float] = []
    clock = CLOCK
    deadline = clock() + seconds
    while len(times) < max_resets and (len(times) < 5 or clock() < deadline):
        t0 = clock()
        env.reset()
        times.append(clock() - t0)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def _fmt_rate(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def _fmt_time(t: float) -> str:
    return f"{t * 1e6:.1f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"


def resolve_ids(patterns: list[str] | None) -> list[str]:
    """Expand ids and glob patterns against the registry (default: every ``game:*`` id)."""
    if not patterns:
        return gemgym.list_envs("game:*")
    ids: list[str] = []
    for p in patterns:
        matched = gemgym.list_envs(p) if any(ch in p for ch in "*?[") else [p]
        ids.extend(i for i in matched if i not in ids)
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="*", help="env ids or glob patterns (default: game:*)")
    parser.add_argument("--quick", action="store_true", help="short timings (a smoke run)")
    parser.add_argument("--seconds", type=float, help="timing window per measurement")
    parser.add_argument("--wall", action="store_true", help="time with the wall clock")
    parser.add_argument(
        "--gem-python",
        help="Python of a venv with gem-llm installed: measure upstream GEM in the same run",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    seconds = args.seconds if args.seconds else (0.25 if args.quick else 1.0)
    ids = resolve_ids(args.ids)

    header = (
        "| env | steps/s (make) | steps/s (plain loop) | wrapper overhead | reset median | "
        "reset p95 | mean ep len | steps/s ÷ GEM | reset speed-up vs GEM |"
    )
    if args.gem_python:
        header = header.replace("steps/s ÷ GEM |", "GEM now (same run) | steps/s ÷ GEM now |")
    clock = "wall clock" if args.wall else "process CPU time"
    print(f"{clock}, {seconds:.2f} s per measurement, {len(ids)} ids\n", file=sys.stderr)
    print(header)
    print("|" + "---|" * (10 if args.gem_python else 9))
    slow: list[str] = []
    for env_id in ids:
        env = gemgym.make(env_id)
        wrapped, ep_len = steps_per_second(env, seconds)
        plain, _ = steps_per_second(env.unwrapped, seconds)
        med, p95 = reset_latency(env, seconds / 2)
        overhead = plain / wrapped - 1
        gem_steps = GEM_STEPS_PER_S.get(env_id)
        gem_reset = GEM_RESET_S.get(env_id)
        vs_steps = f"**{wrapped / gem_steps:.2f}×**" if gem_steps else "–"
        if args.gem_python:
            gem_now = gem_steps_per_second(args.gem_python, env_id, seconds)
            gem_steps = gem_now
            vs_steps = (
                f"{_fmt_rate(gem_now)} | **{wrapped / gem_now:.2f}×**"
                if gem_now
                else "n/a (GEM cannot run it here) | –"
            )
        vs_reset = f"{gem_reset / med:.2f}×" if gem_reset else "–"
        if gem_steps and wrapped < gem_steps:
            slow.append(f"{env_id}: {wrapped:.0f} < GEM {gem_steps:.0f} steps/s")
        print(
            f"| {env_id} | {_fmt_rate(wrapped)} | {_fmt_rate(plain)} | {overhead:+.0%} | "
            f"{_fmt_time(med)} | {_fmt_time(p95)} | {ep_len:.1f} | {vs_steps} | {vs_reset} |",
            flush=True,
        )
        env.close()
    if slow:
        print("\nslower than upstream GEM:\n  " + "\n  ".join(slow), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
