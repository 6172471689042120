"""Instructions per env step, this tree against another, counted by valgrind's callgrind.

Wall-clock figures on a shared 2-core machine move by 10-30 % from run to run; instruction
counts do not (the same binary, inputs and workload give the same count whatever else the
machine runs), so a side-by-side comparison of the Python hot paths is exact to a fraction of a
percent. Each workload runs twice, with ``n`` and ``2 n`` steps, and the difference of the two
totals divided by ``n`` is the cost of one step (imports, env construction and warm-up cancel).

    git worktree add /tmp/base <commit>
    .venv/bin/python benchmarks/instructions.py --baseline /tmp/base/src
    .venv/bin/python benchmarks/instructions.py --baseline /tmp/base/src --quick

Needs ``valgrind`` (Debian package). Workloads: a made env's ``step`` on every game (random
actions drawn beforehand, resets included), and the ``sync`` vector env at N = 8 and 64.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

GAMES = [
    "GuessTheNumber-v0-hard",
    "Mastermind-v0-hard",
    "Minesweeper-v0-easy",
    "Wordle-v0-easy",
    "FifteenPuzzle-v0-easy",
    "Hangman-v0-easy",
    "Sudoku-v0-easy",
    "TowerofHanoi-v0-easy",
    "Game2048-v0-easy",
    "Sokoban-v0-easy",
    "Crosswords-v0-easy",
    "WordSearch-v0-easy",
]

# The workload, run in a fresh interpreter: argv = src kind env_id steps.
WORKLOAD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import gemgym
kind, env_id, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
probe = gemgym.make(env_id)
probe.reset(seed=1)
if kind == "step":
    acts = [probe.unwrapped.sample_random_action() for _ in range(256)]
    env = gemgym.make(env_id)
    env.reset(seed=0)

    def work():
        for i in range(n):
            _, _, te, tr, _ = env.step(acts[i % 256])
            if te or tr:
                env.reset()
else:
    from gemgym.vector import make_vector_env

    size = int(kind[3:])
    batches = [[probe.unwrapped.sample_random_action() for _ in range(size)] for _ in range(64)]
    venv = make_vector_env([env_id] * size)
    venv.reset(seed=0)

    def work():
        for i in range(n // size):
            venv.step(batches[i % 64])
work()
"""


def count(src: Path, kind: str, env_id: str, steps: int) -> int:
    """Instructions of the whole workload process (callgrind's total)."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-c",
            WORKLOAD,
            str(src),
            kind,
            env_id,
            str(steps),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # the same str hashes in every run
    ).stderr
    found = re.search(r"Collected\s*:\s*(\d+)", out)
    if found is None:
        raise RuntimeError(f"no callgrind total in:\n{out[-2000:]}")
    return int(found.group(1))


def per_step(src: Path, kind: str, env_id: str, steps: int) -> float:
    return (count(src, kind, env_id, 2 * steps) - count(src, kind, env_id, steps)) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--baseline", required=True, help="the other tree's src/ directory")
    p.add_argument("--quick", action="store_true", help="3 games and one vector size")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed: apt-get install valgrind")
    games = GAMES[:3] if args.quick else GAMES
    work = [("step", f"game:{g}") for g in games]
    work += [(f"vec{n}", "game:GuessTheNumber-v0-hard") for n in ((8,) if args.quick else (8, 64))]
    work += [] if args.quick else [("vec64", "game:Sudoku-v0-easy")]
    base = Path(args.baseline)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = {
            (k, e): (
                pool.submit(per_step, SRC, k, e, args.steps),
                pool.submit(per_step, base, k, e, args.steps),
            )
            for k, e in work
        }
        print("| workload | env | instructions/step (this tree) | (baseline) | ratio |")
        print("|---|---|---|---|---|")
        for (kind, env_id), (new, old) in jobs.items():
            n, o = new.result(), old.result()
            label = "made env step" if kind == "step" else f"sync vector, N = {kind[3:]}"
            print(f"| {label} | {env_id} | {n:,.0f} | {o:,.0f} | {n / o:.3f} |", flush=True)


if __name__ == "__main__":
    main()
