"""Success rate and mean turns of the oracle (expert) and random agents on every game id.

Plays ``--episodes`` seeded episodes (seeds 0..N-1, the same for both agents) with
``gemgym.rollout`` and prints the markdown table of ``docs/games.md``.

Run: ``.venv/bin/python benchmarks/game_baselines.py [--quick] [--episodes N] [--ids ID ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import gemgym
from gemgym.agents import BaseAgent, OracleAgent, RandomAgent


def evaluate(env_id: str, agent: BaseAgent, episodes: int) -> tuple[float, float, float] | None:
    """(success rate, mean turns, mean return), or ``None`` if the env lacks what the agent needs."""
    try:
        eps = list(gemgym.rollout(env_id, agent, episodes=episodes, seed=0))
    except NotImplementedError:
        return None
    n = len(eps)
    return (
        sum(e.success for e in eps) / n,
        sum(e.length for e in eps) / n,
        sum(e.total_return for e in eps) / n,
    )


def _cell(result: tuple[float, float, float] | None) -> str:
    if result is None:
        return "– | – | –"
    success, turns, ret = result
    return f"{success:.0%} | {turns:.1f} | {ret:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="*", help="env ids or glob patterns (default: game:*)")
    parser.add_argument("--episodes", type=int, help="episodes per agent and id (default 50)")
    parser.add_argument("--quick", action="store_true", help="10 episodes per agent and id")
    args = parser.parse_args(argv)
    episodes = args.episodes or (10 if args.quick else 50)
    patterns = args.ids or ["game:*"]
    ids: list[str] = []
    for p in patterns:
        for i in gemgym.list_envs(p) if any(ch in p for ch in "*?[") else [p]:
            if i not in ids:
                ids.append(i)
    print(f"{episodes} episodes per agent and id (seeds 0..{episodes - 1})\n", file=sys.stderr)
    print(
        "| env | oracle success | oracle turns | oracle return "
        "| random success | random turns | random return |"
    )
    print("|---|---|---|---|---|---|---|")
    for env_id in ids:
        start = time.perf_counter()
        oracle = evaluate(env_id, OracleAgent(), episodes)
        rand = evaluate(env_id, RandomAgent(), episodes)
        print(f"| {env_id} | {_cell(oracle)} | {_cell(rand)} |", flush=True)
        print(f"  {env_id}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
