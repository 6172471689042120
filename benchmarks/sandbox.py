"""Code sandbox: latency per backend, HumanEval grading throughput, timeout accuracy.

Baseline (measured in the same run): GEM's unsandboxed execution, ``subprocess.run([python,
"-c", code])`` with a minimal environment and no limits (its ``sandbox_type="none"``).

    .venv/bin/python benchmarks/sandbox.py           # full run (about 1 minute)
    .venv/bin/python benchmarks/sandbox.py --quick   # fewer repetitions
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gemgym.envs.code import humaneval_items
from gemgym.sandbox import Limits, RunRequest, Sandbox
from gemgym.sandbox.bwrap import BwrapSandbox
from gemgym.sandbox.pool import PoolSandbox


def gem_baseline(code: str, stdin: str = "") -> bool:
    """GEM's ``run_python`` with ``sandbox_type="none"`` (no isolation, no limits)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin.encode(),
        capture_output=True,
        timeout=10,
        env={"PATH": "/usr/bin:/bin"},
    )
    return done.returncode == 0


def median_ms(fn: Callable[[], object], n: int) -> float:
    fn()  # warm
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def humaneval_programs() -> list[tuple[str, str]]:
    return [
        (str(item["solution"]), str(item["tests"]["asserts"]))  # type: ignore[index]
        for item in humaneval_items()
    ]


def grade_sandbox(sandbox: Sandbox, programs: list[tuple[str, str]]) -> tuple[float, int]:
    start = time.perf_counter()
    results = sandbox.run_many(RunRequest(code, check=check) for code, check in programs)
    elapsed = time.perf_counter() - start
    return elapsed, sum(bool(r.ok and r.check_passed) for r in results)


def grade_baseline(programs: list[tuple[str, str]], workers: int) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = list(pool.map(lambda p: gem_baseline(p[0] + "\n" + p[1]), programs))
    return time.perf_counter() - start, sum(ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    n = 15 if args.quick else 50
    limits = Limits(timeout=10)
    code = "print(1+1)"

    print(f"== print(1+1) median latency ({n} runs) ==")
    base = median_ms(lambda: gem_baseline(code), n)
    print(f"GEM baseline (subprocess python -c, unsandboxed): {base:7.2f} ms")
    pool = PoolSandbox(limits, size=2)
    pool.warm_up()
    bwrap = BwrapSandbox(limits)
    rows = {"pool (warm bwrap fork-servers)": pool, "bwrap (one-shot)": bwrap}
    for name, sb in rows.items():
        ms = median_ms(lambda sb=sb: sb.run(code), n)  # type: ignore[misc]
        print(f"{name:49s} {ms:7.2f} ms  ({base / ms:5.2f}x vs baseline)")

    programs = humaneval_programs()
    if args.quick:
        programs = programs[:60]
    print(f"\n== grading {len(programs)} HumanEval canonical solutions, 2 workers ==")
    t_base, ok_base = grade_baseline(programs, 2)
    print(f"GEM baseline: {t_base:6.2f} s  {len(programs) / t_base:6.1f}/s  passed {ok_base}")
    t_pool, ok_pool = grade_sandbox(pool, programs)
    print(
        f"pool:         {t_pool:6.2f} s  {len(programs) / t_pool:6.1f}/s  passed {ok_pool}  "
        f"({t_base / t_pool:4.2f}x)"
    )

    reps = 3 if args.quick else 5
    print(f"\n== timeout accuracy: `while True: pass` with timeout 1.0 s ({reps} runs) ==")
    for name, sb in rows.items():
        overs = []
        for _ in range(reps):
            t = time.perf_counter()
            result = sb.run("while True: pass", timeout=1.0)
            assert result.timed_out
            overs.append(time.perf_counter() - t - 1.0)
        print(
            f"{name:32s} overshoot median {statistics.median(overs) * 1000:6.1f} ms, "
            f"max {max(overs) * 1000:6.1f} ms"
        )
    print("GEM baseline: a 5 s tool timeout was enforced at 10 s (overshoot 5000 ms)")
    pool.close()
    bwrap.close()


if __name__ == "__main__":
    main()
