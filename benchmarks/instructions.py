"""Instructions per env step, counted by valgrind's callgrind: this tree against another tree
and against upstream GEM.

Wall-clock figures on a shared 2-core machine move by 10-30 % from run to run; instruction
counts do not (the same binary, inputs and workload give the same count whatever else the
machine runs), so a side-by-side comparison of the Python hot paths is exact to a fraction of a
percent. Each workload plays ``n`` steps to warm up, then ``n`` more between two calls of
``os.getppid()``, where callgrind dumps its counters (``--dump-before=os_getppid``): the second
dump divided by ``n`` is the cost of one step (imports, env construction and warm-up are left
out; the resets of the episodes that end within the ``n`` steps are counted in).

    git worktree add /tmp/base <commit>
    python3.11 -m venv /tmp/gembench && /tmp/gembench/bin/pip install gem-llm==0.1.0 pandas
    .venv/bin/python benchmarks/instructions.py --baseline /tmp/base/src --gem-python /tmp/gembench/bin/python
    .venv/bin/python benchmarks/instructions.py --gem-python /tmp/gembench/bin/python --quick

Workloads: a made env's ``step`` on each of the 12 games (``gemgym.make(id)``, 256 random actions
drawn beforehand from ``sample_random_action()`` of an env reset with seed 1, played in a cycle
from ``reset(seed=0)``, episodes back to back), and the ``sync`` vector env at N = 8 and 64
(against ``--baseline`` only).

GEM (``--gem-python``, the Python of a venv with ``gem-llm`` installed, as a user installs it)
plays the same action strings through ``gem.make(id)`` with the same ids, seeds and loop. Its
interpreter must be the same binary as this one (a venv of the same Python), or the counts would
not compare; the driver checks. GEM's Crosswords imports pandas, which gem-llm does not require
(install it too). GEM's Wordle, Hangman and WordSearch read NLTK's ``words`` corpus, which
``nltk.download`` fetches from the internet in every ``__init__``: the driver gives them a
stand-in corpus of the same size (``en-basic``: 850 words of gemgym's common list, ``en``:
gemgym's common and rare lists) and makes ``nltk.download`` a no-op; GEM's code is otherwise run
as installed. The table shows the mean episode length of each side, so the reset share of the
per-step figure can be compared.

Needs ``valgrind`` (Debian package).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
QUICK_GAMES = ["GuessTheNumber-v0-hard", "Wordle-v0-easy", "TowerofHanoi-v0-easy"]

# The actions of every game workload: argv = src env_id; prints them as JSON.
ACTIONS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gemgym
probe = gemgym.make(sys.argv[2])
probe.reset(seed=1)
print(json.dumps([probe.unwrapped.sample_random_action() for _ in range(256)]))
"""

# The workload, run in a fresh interpreter: argv = src kind env_id steps actions_file.
# It prints the number of episodes that ended.
WORKLOAD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import gemgym
kind, env_id, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(sys.argv[5]) as f:
    acts = json.load(f)
if kind == "step":
    env = gemgym.make(env_id)
    env.reset(seed=0)

    def work(start):
        episodes = 0
        for i in range(start, start + n):
            _, _, te, tr, _ = env.step(acts[i % 256])
            if te or tr:
                episodes += 1
                env.reset()
        return episodes
else:
    from gemgym.vector import make_vector_env

    size = int(kind[3:])
    batches = [[acts[(i * size + j) % 256] for j in range(size)] for i in range(64)]
    venv = make_vector_env([env_id] * size)
    venv.reset(seed=0)

    def work(start):
        for i in range(start // size, (start + n) // size):
            venv.step(batches[i % 64])
        return 0
work(0)
os.getppid()  # callgrind dumps here (the warm-up) ...
episodes = work(n)
os.getppid()  # ... and here (the measured steps)
print(episodes)
"""

# The same loop on upstream GEM (argv = - step env_id steps actions_file).
GEM_WORKLOAD = r"""
import json, logging, os, sys
logging.disable(logging.CRITICAL)
import nltk
nltk.download = lambda *args, **kwargs: True  # offline: the stand-in corpus is in NLTK_DATA
import gem
env_id, n = sys.argv[3], int(sys.argv[4])
with open(sys.argv[5]) as f:
    acts = json.load(f)
env = gem.make(env_id)
env.reset(seed=0)

def work(start):
    episodes = 0
    for i in range(start, start + n):
        _, _, te, tr, _ = env.step(acts[i % 256])
        if te or tr:
            episodes += 1
            env.reset()
    return episodes
work(0)
os.getppid()  # callgrind dumps here (the warm-up) ...
episodes = work(n)
os.getppid()  # ... and here (the measured steps)
print(episodes)
"""

_PROBE = "import os, sys; print(os.path.realpath(sys._base_executable)); print(sys.version)"


def per_step(
    python: str,
    code: str,
    src: str,
    kind: str,
    env_id: str,
    steps: int,
    actions: Path,
    env: dict[str, str],
    keep: Path | None,
) -> tuple[float, float]:
    """Instructions per step (callgrind's second dump), and the mean episode length (steps per
    episode ended within the measured steps); ``keep``: where to copy that dump."""
    with tempfile.TemporaryDirectory(prefix="gemgym-callgrind-") as tmp:
        out_file = Path(tmp) / "callgrind.out"
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--dump-before=os_getppid",
                f"--callgrind-out-file={out_file}",
                python,
                "-c",
                code,
                src,
                kind,
                env_id,
                str(steps),
                str(actions),
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **env, "PYTHONHASHSEED": "0"},  # the same str hashes each run
        )
        dumps = sorted(Path(tmp).glob("callgrind.out.*"))
        if len(dumps) != 2:  # os.getppid() called elsewhere: the blocks would be wrong
            raise RuntimeError(f"expected 2 dumps, got {len(dumps)}:\n{out.stderr[-2000:]}")
        found = re.search(r"^summary:\s*(\d+)", dumps[1].read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError(f"no summary in {dumps[1]}")
        if keep is not None:
            shutil.copyfile(dumps[1], keep)
    episodes = int(out.stdout.split()[-1])
    return int(found.group(1)) / steps, (steps / episodes if episodes else float("nan"))


def stand_in_nltk_words(root: Path) -> Path:
    """An ``NLTK_DATA`` folder whose ``words`` corpus is built from gemgym's shipped lists."""
    data = SRC / "gemgym" / "envs" / "games" / "data"
    common = (data / "words_common.txt").read_text().split()
    rare = (data / "words_rare.txt").read_text().split()
    folder = root / "corpora" / "words"
    folder.mkdir(parents=True)
    (folder / "en-basic").write_text("\n".join(common[:850]) + "\n")  # NLTK's en-basic: 850
    (folder / "en").write_text("\n".join(sorted(set(common) | set(rare))) + "\n")
    return root


def same_interpreter(python: str) -> None:
    mine = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True).stdout
    theirs = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True).stdout
    if mine != theirs:
        sys.exit(f"--gem-python must be a venv of this Python:\n{mine}against\n{theirs}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--baseline", help="the other tree's src/ directory")
    p.add_argument("--gem-python", help="the Python of a venv with gem-llm installed")
    p.add_argument("--quick", action="store_true", help="3 games and one vector size")
    p.add_argument("--games", nargs="*", help="these games only (ids without 'game:')")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--profile",
        type=Path,
        help="keep each measured block's callgrind file here (for callgrind_annotate)",
    )
    args = p.parse_args()
    if not (args.baseline or args.gem_python):
        p.error("give --baseline, --gem-python or both")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed: apt-get install valgrind")
    if args.gem_python:
        same_interpreter(args.gem_python)
    games = args.games or (QUICK_GAMES if args.quick else GAMES)
    work = [("step", f"game:{g}") for g in games]
    if args.baseline and not args.games:
        work += [
            (f"vec{n}", "game:GuessTheNumber-v0-hard") for n in ((8,) if args.quick else (8, 64))
        ]
        work += [] if args.quick else [("vec64", "game:Sudoku-v0-easy")]
    tmp = Path(tempfile.mkdtemp(prefix="gemgym-instructions-"))
    gem_env = {"NLTK_DATA": str(stand_in_nltk_words(tmp / "nltk_data"))}
    py = sys.executable
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = {}
        for kind, env_id in work:
            actions = tmp / f"{kind}-{env_id.replace(':', '_')}.json"
            drawn = subprocess.run(
                [py, "-c", ACTIONS, str(SRC), env_id], capture_output=True, text=True, check=True
            )
            actions.write_text(drawn.stdout)
            assert len(json.loads(drawn.stdout)) == 256
            run = [("tree", py, WORKLOAD, str(SRC), {})]
            run.append(("base", py, WORKLOAD, args.baseline, {}) if args.baseline else None)
            gem = args.gem_python and kind == "step"
            run.append(("gem", args.gem_python, GEM_WORKLOAD, "-", gem_env) if gem else None)
            if args.profile:
                args.profile.mkdir(parents=True, exist_ok=True)
            jobs[kind, env_id] = [
                pool.submit(
                    per_step,
                    *r[1:4],
                    kind,
                    env_id,
                    args.steps,
                    actions,
                    r[4],
                    args.profile / f"{r[0]}-{kind}-{env_id[5:]}.out" if args.profile else None,
                )
                if r
                else None
                for r in run
            ]
        head = "| workload | env | this tree"
        rule = "|---|---|---:"
        if args.baseline:
            head += " | baseline | ÷ baseline"
            rule += "|---:|---:"
        if args.gem_python:
            head += " | GEM | ÷ GEM | episode length (this tree / GEM)"
            rule += "|---:|---:|---:"
        print(f"{head} |\n{rule}|", flush=True)
        for (kind, env_id), (new, old, gem) in jobs.items():
            n, n_len = new.result()
            label = "made env step" if kind == "step" else f"`sync` vector, N = {kind[3:]}"
            row = f"| {label} | {env_id.removeprefix('game:')} | {n:,.0f}"
            if args.baseline:
                o, _ = old.result()
                row += f" | {o:,.0f} | {n / o:.3f}"
            if args.gem_python:
                if gem is None:
                    row += " | – | – | –"
                else:
                    g, g_len = gem.result()
                    row += f" | {g:,.0f} | {n / g:.3f} | {n_len:.1f} / {g_len:.1f}"
            print(row + " |", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
