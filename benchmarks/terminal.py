"""Terminal envs: a warm ``echo hi`` step, and what starting and grading an episode costs.

Baseline (measured in the same run): the unsandboxed way to run one command,
``subprocess.run(["bash", "-c", cmd])`` on the host (no isolation, no state kept between
commands), and one fresh bubblewrap sandbox per command (what a shell without a long-lived
session would pay).

Measured:

* ``ShellSession.run("echo hi")`` on a warm session: median and p95 latency (goal: <= 10 ms);
* ``env.step("echo hi")`` of ``terminal:hello-file`` (parsing, the command, the observation);
* ``env.reset()`` of ``terminal:hello-file`` and of ``terminal:git-revert`` (a setup script
  that builds a git repository), and grading (``done``: export the workspace, a fresh sandbox,
  the hidden tests), back to back and after 1 s of "agent time" (the env starts the next
  sandbox in the background, so an agent that thinks finds it ready).

    .venv/bin/python benchmarks/terminal.py           # about half a minute
    .venv/bin/python benchmarks/terminal.py --quick   # fewer repetitions
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable

import gemgym
from gemgym.sandbox.shell import ShellSession

GOAL_MS = 10.0


def timed(fn: Callable[[], object], n: int) -> list[float]:
    """Wall milliseconds of ``n`` calls of ``fn``."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def row(name: str, values: list[float], *baselines: float) -> None:
    """One line: median, p95, and the speed-up over each baseline given."""
    median = statistics.median(values)
    ratios = "  ".join(f"{b / median:8.1f}x" for b in baselines)
    print(f"{name:52s} {median:9.2f} ms  p95 {p95(values):9.2f} ms  {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    steps = 200 if args.quick else 1000
    episodes = 5 if args.quick else 20

    print(f"{'':52s} {'median':>12s}  {'':>13s}  vs host, vs fresh sandbox")
    host = timed(lambda: subprocess.run(["bash", "-c", "echo hi"], capture_output=True), 50)
    row("baseline: subprocess bash -c 'echo hi' (host, none)", host)
    base = statistics.median(host)

    def fresh_sandbox() -> None:
        with ShellSession() as s:
            s.run("echo hi")

    fresh = timed(fresh_sandbox, episodes)
    row("baseline: one fresh sandbox per command", fresh)

    with ShellSession() as session:
        session.run("echo warm")
        warm = timed(lambda: session.run("echo hi"), steps)
    row("ShellSession.run('echo hi'), warm", warm, base, statistics.median(fresh))

    with gemgym.make("terminal:hello-file", max_turns=None) as env:
        env.reset(seed=0)
        env.step("echo warm")
        step = timed(lambda: env.step("```bash\necho hi\n```"), steps // 2)
        row("env.step('echo hi') (terminal:hello-file), warm", step, base, statistics.median(fresh))
        resets = timed(lambda: env.reset(seed=0), episodes)
        row("env.reset() terminal:hello-file, back to back", resets)
        for pause in (0.0, 1.0):
            grading, resets = [], []
            for _ in range(episodes):
                time.sleep(pause)
                resets += timed(lambda: env.reset(seed=0), 1)
                env.step(env.unwrapped.expert_action())
                time.sleep(pause)
                start = time.perf_counter()
                assert env.step("done")[1] == 1.0
                grading.append((time.perf_counter() - start) * 1000)
            when = "back to back" if not pause else f"after {pause:g} s of agent time"
            if pause:
                row(f"env.reset() terminal:hello-file, {when}", resets)
            row(f"grading ('done'), {when}", grading)
    with gemgym.make("terminal:git-revert") as env:
        row("env.reset() terminal:git-revert (setup builds a repo)", timed(env.reset, episodes))

    median = statistics.median(warm)
    verdict = "meets" if median <= GOAL_MS else "MISSES"
    print(f"\nwarm 'echo hi': {median:.2f} ms median, {verdict} the {GOAL_MS:g} ms goal")


if __name__ == "__main__":
    main()
