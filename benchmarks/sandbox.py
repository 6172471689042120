"""Code sandbox: latency, HumanEval grading, timeouts, PythonTool throughput, a reliability soak.

Baseline (measured in the same run): GEM's unsandboxed execution, ``subprocess.run([python,
"-c", code])`` with a minimal environment and no limits (its ``sandbox_type="none"``).

Measured:

* ``print(1+1)`` median latency per backend (the warm pool, one-shot bubblewrap);
* grading HumanEval's canonical solutions with 2 workers;
* how far a 1 s timeout overshoots;
* ``print(1+1)`` through ONE ``PythonTool`` (``parse`` + ``execute`` of
  ``"<python>print(1+1)</python>"``) on one ``make_sandbox()`` (default backend, its default 2
  workers, warmed up): the median latency of one warm call, and runs/s from 1, 4 and 16 client
  threads against the baseline at the same concurrencies;
* CPU time per warm run in the sandbox (its server and the children it reaped, from
  ``/proc/PID/stat``): ``--cpu N`` runs of ``print(1+1)`` (default 1,000; 0 skips it) and 5 of
  ``time.sleep(1)`` on one warm worker (CPU time does not depend on the machine's other load);
* a reliability soak: ``--soak N`` runs of ``print(1+1)`` (default 10,000; 1,000 with
  ``--quick``) from 16 threads through one ``make_sandbox()``, half of them from long-lived
  threads and half from short-lived ``threading.Thread``s that exit after a few runs (workers a
  sandbox starts from a thread that then exits must survive it). Any result that is not ok with
  stdout exactly ``"2\\n"``, or any exception, is a failure: the count and the first few are
  printed and the script exits 1.

    .venv/bin/python benchmarks/sandbox.py           # full run (a few minutes)
    .venv/bin/python benchmarks/sandbox.py --quick   # fewer repetitions
    .venv/bin/python benchmarks/sandbox.py --soak 0  # skip the soak
    .venv/bin/python benchmarks/sandbox.py --python /usr/bin/python3  # that interpreter inside
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gemgym.envs.code import humaneval_items
from gemgym.sandbox import Limits, RunRequest, Sandbox, make_sandbox
from gemgym.sandbox.bwrap import BwrapSandbox
from gemgym.sandbox.pool import PoolSandbox
from gemgym.tools.python import PythonTool

CONCURRENCY = (1, 4, 16)
SOAK_THREADS = 16
SOAK_RUNS_PER_SHORT_THREAD = 4
SOAK_ROUNDS = 4  # long-lived and short-lived phases alternate this many times
SHOW_FAILURES = 5
PYTHON: list[str | None] = [None]
"""The interpreter the sandboxes run (``--python``; default: this one)."""


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


def warm_up(sandbox: Sandbox) -> None:
    """Start the sandbox's workers now (``warm_up`` where the backend has one) and run once."""
    start_workers = getattr(sandbox, "warm_up", None)
    if callable(start_workers):
        start_workers()
    for _ in range(max(2, int(getattr(sandbox, "parallelism", 2)))):
        sandbox.run("pass")


def tool_runner(tool: PythonTool, action: str) -> Callable[[], tuple[bool, str]]:
    """One model action through the tool, as the env does it: ``parse`` then ``execute``."""

    def run() -> tuple[bool, str]:
        call = tool.parse(action)
        if call is None:
            raise RuntimeError(f"PythonTool.parse found no call in {action!r}")
        result = tool.execute(call)
        return bool(result.ok), str(result.observation)

    return run


def throughput(fn: Callable[[], object], threads: int, runs: int) -> tuple[float, list[object]]:
    """Runs/s of ``runs`` calls of ``fn`` from ``threads`` client threads, and their results."""
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        results = list(pool.map(lambda _: fn(), range(runs)))
        elapsed = time.perf_counter() - start
    return runs / elapsed, results


def bench_tool(code: str, n: int, runs: int, base_ms: float) -> None:
    """``code`` through one PythonTool on one ``make_sandbox()``: latency and throughput."""
    action = f"<python>{code}</python>"
    sandbox = make_sandbox(limits=Limits(timeout=10), python=PYTHON[0])
    try:
        warm_up(sandbox)
        tool = PythonTool(sandbox=sandbox)
        run = tool_runner(tool, action)
        ok, observation = run()
        if not ok or "2" not in observation:
            print(f"warning: the warm-up call returned ok={ok} {observation!r}")
        workers = getattr(sandbox, "parallelism", "?")
        print(
            f"\n== {action} through one PythonTool "
            f"({getattr(sandbox, 'name', type(sandbox).__name__)} sandbox, {workers} workers) =="
        )
        ms = median_ms(run, n)
        target = "meets" if ms <= 5.0 else "misses"
        print(
            f"median latency of one warm call ({n} runs): {ms:6.2f} ms  "
            f"({base_ms / ms:4.2f}x vs baseline {base_ms:.2f} ms; {target} the 5 ms target)"
        )
        print(f"throughput, {runs} runs per level:")
        print(f"{'threads':>7s}  {'GEM baseline':>14s}  {'PythonTool':>14s}  ratio  bad results")
        for threads in CONCURRENCY:
            base_rate, base_results = throughput(lambda: gem_baseline(code), threads, runs)
            rate, results = throughput(run, threads, runs)
            bad = sum(1 for r in results if not (r[0] and "2" in r[1]))  # type: ignore[index]
            bad_base = sum(1 for r in base_results if not r)
            print(
                f"{threads:7d}  {base_rate:10.1f} /s  {rate:10.1f} /s  {rate / base_rate:4.2f}x  "
                f"{bad} (baseline {bad_base})"
            )
        tool.close()
    finally:
        sandbox.close()


def describe(result: Any) -> str:
    fields = ("ok", "stdout", "stderr", "error", "exit_code", "timed_out", "killed_by")
    parts = []
    for name in fields:
        value = getattr(result, name, None)
        if isinstance(value, str) and len(value) > 200:
            value = value[:200] + "..."
        parts.append(f"{name}={value!r}")
    return " ".join(parts)


def soak(total: int) -> int:
    """``total`` runs of ``print(1+1)`` from 16 threads, long- and short-lived; the failures."""
    code = "print(1+1)"
    failures: list[str] = []
    failures_lock = threading.Lock()
    done = [0]

    def one(phase: str, index: int, sandbox: Sandbox) -> None:
        try:
            result = sandbox.run(code)
            good = result.ok is True and result.stdout == "2\n"
            detail = "" if good else describe(result)
        except Exception as e:  # any exception is a failure, not the end of the soak
            good, detail = False, f"{type(e).__name__}: {e}"
        with failures_lock:
            done[0] += 1
            if not good:
                failures.append(f"run {index} ({phase}): {detail}")

    # Workers start on first use, from the client threads (no warm-up from the main thread).
    sandbox = make_sandbox(python=PYTHON[0])
    name = getattr(sandbox, "name", type(sandbox).__name__)
    workers = getattr(sandbox, "parallelism", "?")
    print(
        f"\n== reliability soak: {total} runs of {code} from {SOAK_THREADS} threads, one "
        f"{name} sandbox ({workers} workers); half from short-lived threads "
        f"({SOAK_RUNS_PER_SHORT_THREAD} runs each) =="
    )
    counts = {"long-lived": 0, "short-lived": 0}
    slots = threading.BoundedSemaphore(SOAK_THREADS)  # short-lived threads alive at once

    def short(indices: range) -> None:
        try:
            for i in indices:
                one("short-lived", i, sandbox)
        finally:
            slots.release()

    start = time.perf_counter()
    next_index = 0
    try:
        for round_ in range(SOAK_ROUNDS):
            # this round's share of each half (the last round takes the remainder)
            long_n = total // 2 // SOAK_ROUNDS
            short_n = (total - total // 2) // SOAK_ROUNDS
            if round_ == SOAK_ROUNDS - 1:
                long_n = total // 2 - long_n * (SOAK_ROUNDS - 1)
                short_n = total - total // 2 - short_n * (SOAK_ROUNDS - 1)
            # long-lived: one thread pool for the phase (its threads exit when it shuts down)
            first = next_index
            with ThreadPoolExecutor(SOAK_THREADS) as pool:
                list(
                    pool.map(lambda i: one("long-lived", i, sandbox), range(first, first + long_n))
                )
            next_index += long_n
            counts["long-lived"] += long_n
            # short-lived: fresh threads, at most 16 alive, each exits after a few runs
            alive: list[threading.Thread] = []
            for lo in range(next_index, next_index + short_n, SOAK_RUNS_PER_SHORT_THREAD):
                hi = min(lo + SOAK_RUNS_PER_SHORT_THREAD, next_index + short_n)
                slots.acquire()
                thread = threading.Thread(target=short, args=(range(lo, hi),), daemon=True)
                thread.start()
                alive = [t for t in alive if t.is_alive()]
                alive.append(thread)
            for thread in alive:
                thread.join()
            next_index += short_n
            counts["short-lived"] += short_n
    finally:
        sandbox.close()
    elapsed = time.perf_counter() - start
    by_phase = {
        phase: sum(1 for f in failures if f"({phase})" in f)
        for phase in ("long-lived", "short-lived")
    }
    print(
        f"{done[0]} runs in {elapsed:5.1f} s ({done[0] / elapsed:6.1f}/s): "
        f"{len(failures)} failures (long-lived threads {by_phase['long-lived']}/"
        f"{counts['long-lived']}, short-lived threads {by_phase['short-lived']}/"
        f"{counts['short-lived']})"
    )
    for failure in failures[:SHOW_FAILURES]:
        print(f"  {failure}")
    if len(failures) > SHOW_FAILURES:
        print(f"  ... and {len(failures) - SHOW_FAILURES} more")
    return len(failures)


def _server_pid() -> int:
    """The host pid of this process's one sandboxed fork-server (a descendant of this one)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parent[int(entry)] = int(stat[1])
    todo, found = [os.getpid()], []
    while todo:
        pid = todo.pop()
        todo += [child for child, ppid in parent.items() if ppid == pid]
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"bwrap") and b"main_server(" in b" ".join(argv):
                found.append(pid)
    if len(found) != 1:
        raise RuntimeError(f"expected one sandbox server below this process, found {found}")
    return found[0]


def _sandbox_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it reaped (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def bench_cpu(n: int) -> None:
    """CPU time per warm run, in the sandbox (one worker)."""
    print("\n== CPU time in the sandbox (server and its children), one warm worker ==")
    with PoolSandbox(Limits(timeout=10), size=1, python=PYTHON[0]) as sb:
        sb.warm_up()
        for code, runs in (("print(1+1)", n), ("import time\ntime.sleep(1)", 5)):
            for _ in range(3):
                sb.run(code)
            pid = _server_pid()
            before = _sandbox_cpu(pid)
            for _ in range(runs):
                result = sb.run(code)
                assert result.ok, result
            per_run = (_sandbox_cpu(pid) - before) / runs
            print(f"{code.splitlines()[-1]:16s} {per_run * 1000:6.2f} ms per run ({runs} runs)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--soak",
        type=int,
        default=None,
        metavar="N",
        help="runs in the reliability soak (default 10000; 1000 with --quick; 0 skips it)",
    )
    parser.add_argument(
        "--cpu",
        type=int,
        default=1000,
        metavar="N",
        help="warm runs whose CPU time in the sandbox is measured (default 1000; 0 skips it)",
    )
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="the interpreter inside the sandboxes (default: this one, with its venv)",
    )
    args = parser.parse_args()
    PYTHON[0] = args.python
    n = 15 if args.quick else 50
    limits = Limits(timeout=10)
    code = "print(1+1)"

    print(f"== print(1+1) median latency ({n} runs) ==")
    base = median_ms(lambda: gem_baseline(code), n)
    print(f"GEM baseline (subprocess python -c, unsandboxed): {base:7.2f} ms")
    pool = PoolSandbox(limits, size=2, python=args.python)
    pool.warm_up()
    bwrap = BwrapSandbox(limits, python=args.python)
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

    bench_tool(code, 4 * n, 60 if args.quick else 300, base)
    if args.cpu > 0:
        bench_cpu(args.cpu)

    total = args.soak if args.soak is not None else (1000 if args.quick else 10000)
    failures = soak(total) if total > 0 else 0
    if failures:
        print(f"\nFAILED: {failures} of {total} soak runs did not return ok with stdout '2\\n'")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
