"""Grading latency per answer (math, QA, reasoning-gym) and make() + first reset() per family.

Baseline for math: math-verify called in-process with its timeouts off (``parse`` + ``verify``,
no time limit at all), i.e. the cheapest way to call the library GEM uses; gemgym's grader adds a
time limit that works in every thread and process. Upstream GEM measured 1.6 ms for
``\\boxed{\\frac{1}{2}}`` vs ``0.5`` (GEM.md §5; gem-llm is not installed here).

    .venv/bin/python benchmarks/grading.py [--quick]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

MATH_CASES = [
    ("half vs 0.5", r"The answer is \boxed{\frac{1}{2}}", "0.5"),
    ("wrong 7 vs 8", r"\boxed{7}", "8"),
    ("2sqrt2 vs sqrt8", r"\boxed{2\sqrt{2}}", r"\sqrt{8}"),
    ("(x+1)^2 vs expanded", r"\boxed{(x+1)^2}", "x^2+2x+1"),
    ("set order", r"\boxed{\{3,1,2\}}", r"\{1,2,3\}"),
]


def _median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _baseline(pred: str, gold: str) -> bool:
    from math_verify import parse, verify

    g = parse(f"${gold}$", parsing_timeout=None)
    p = parse(pred, parsing_timeout=None)
    return bool(verify(g, p, timeout_seconds=None))


def bench_math(n: int) -> None:
    from gemgym.grading import grade_math
    from gemgym.grading.pool import default_pool

    logging.disable(logging.CRITICAL)
    default_pool().warm_up()
    for _, pred, gold in MATH_CASES:  # warm both paths (caches are keyed by answer)
        _baseline(pred, gold)
    print(f"{'math answer':24} {'baseline ms':>12} {'gemgym ms':>10} {'ratio':>7}  method")
    for name, pred, gold in MATH_CASES:
        base = _median_ms(lambda p=pred, g=gold: _baseline(p, g), n)
        from gemgym.grading import math as gm

        def ours(p: str = pred, g: str = gold) -> None:
            gm._VERDICTS.clear()  # time real grading, not the verdict cache
            grade_math(p, g)

        mine = _median_ms(ours, n)
        method = grade_math(pred, gold).method
        print(f"{name:24} {base:12.3f} {mine:10.3f} {base / mine:6.1f}x  {method}")

    # the same from a worker thread (math-verify's own timeouts would raise there)
    out: list[float] = []
    th = threading.Thread(
        target=lambda: out.append(_median_ms(lambda: grade_math(r"\boxed{\frac{1}{2}}", "0.5"), n))
    )
    th.start()
    th.join()
    print(f"half vs 0.5 from a thread: {out[0]:.3f} ms")
    for limit in (1.0, 0.5):
        t = time.perf_counter()
        g = grade_math(r"\boxed{9^{9^{9^9}}}", "1", timeout=limit)
        dt = time.perf_counter() - t
        t = time.perf_counter()
        grade_math(r"\boxed{2\sqrt{3}}", r"\sqrt{12}")
        nxt = time.perf_counter() - t
        print(
            f"9^(9^(9^9)) with a {limit} s limit: {dt * 1e3:.0f} ms, reward "
            f"{float(g.correct)}, next answer graded in {nxt * 1e3:.1f} ms"
        )


def bench_qa_rg(n: int) -> None:
    import gemgym
    from gemgym.grading import qa_exact_match

    qa = _median_ms(lambda: qa_exact_match("The Amazon river", ["Amazon River", "Nile"]), n * 10)
    print(f"QA exact match (2 golds): {qa * 1e3:.1f} µs")
    env = gemgym.make("rg:basic_arithmetic").unwrapped
    env.reset(seed=0)
    item = env.item
    assert item is not None
    cached = env.tasks()
    rg = _median_ms(lambda: cached.score(str(item["answer"]), item), n * 10)
    print(f"reasoning-gym basic_arithmetic score_answer: {rg * 1e3:.1f} µs")


FAMILIES = [
    ("math:GSM8K", "dataset='sample'"),
    ("qa:HotpotQA", "dataset='sample'"),
    ("rg:basic_arithmetic", ""),
    ("rg:sudoku", ""),
]


def bench_make(repeats: int) -> None:
    print("make() + first reset(), fresh process, after `import gemgym` (median):")
    for env_id, kw in FAMILIES:
        code = (
            "import time, gemgym\n"
            "t = time.perf_counter()\n"
            f"env = gemgym.make({env_id!r}{', ' + kw if kw else ''})\n"
            "env.reset(seed=0)\n"
            "print(time.perf_counter() - t)\n"
        )
        times = [
            float(
                subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                ).stdout.split()[-1]
            )
            for _ in range(repeats)
        ]
        print(f"  {env_id:22} {statistics.median(times) * 1e3:8.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (about a minute)")
    args = ap.parse_args()
    n = 30 if args.quick else 200
    bench_math(n)
    bench_qa_rg(n)
    bench_make(1 if args.quick else 3)


if __name__ == "__main__":
    main()
