"""The learner's mean return on every ``ma:*`` game, for expert and random learners against
expert and random opponents (the learner's seat drawn per episode), and the throughput of
:class:`~gemgym.multiagent.SeatVectorEnv` against stepping one self-play env per game.

Prints the tables of docs/multiagent.md. Run:
``.venv/bin/python benchmarks/ma_baselines.py [--episodes N]``.
"""

from __future__ import annotations

import argparse
import time

import gemgym
import gemgym.multiagent as ma
from gemgym.agents import OracleAgent, RandomAgent


def mean_return(game_id: str, learner: str, opponent: str, episodes: int) -> tuple[float, float]:
    """(mean return, share of episodes with a positive return) of the learner."""
    agent = OracleAgent() if learner == "expert" else RandomAgent()
    eps = list(
        gemgym.rollout(
            game_id, agent, episodes=episodes, seed=0, learner="random", opponent=opponent
        )
    )
    return (
        sum(e.total_return for e in eps) / len(eps),
        sum(e.total_return > 0 for e in eps) / len(eps),
    )


def seat_vector_rate(game_id: str, games: int, steps: int) -> tuple[float, float]:
    """Moves per second: SeatVectorEnv (random moves for every seat) vs a loop of SelfPlayEnvs."""
    venv = ma.SeatVectorEnv(game_id, games)
    venv.reset(seed=0)
    moves = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        slots = venv.acting_slots()
        venv.step(dict(zip(slots, venv.call("sample_random_action", indices=slots), strict=True)))
        moves += len(slots)
    vec = moves / (time.perf_counter() - t0)
    envs = [gemgym.make(game_id) for _ in range(games)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    moves = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        for e in envs:
            _, _, done, _, _ = e.step(e.sample_random_action())
            moves += 2  # the learner's move and the random opponent's
            if done:
                e.reset()
    loop = moves / (time.perf_counter() - t0)
    return vec, loop


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=400)
    args = parser.parse_args()
    ids = ma.list_games("ma:*")
    print(f"learner's mean return (share of episodes won or dealt), {args.episodes} episodes\n")
    print("| game | expert vs expert | expert vs random | random vs expert | random vs random |")
    print("|---|---|---|---|---|")
    for game_id in ids:
        cells = []
        for learner, opponent in [
            ("expert", "expert"),
            ("expert", "random"),
            ("random", "expert"),
            ("random", "random"),
        ]:
            ret, won = mean_return(game_id, learner, opponent, args.episodes)
            cells.append(f"{ret:+.2f} ({won:.0%})")
        print(f"| {game_id} | " + " | ".join(cells) + " |")
    print("\nmoves per second, 64 games, random moves\n")
    print("| game | SeatVectorEnv | loop of SelfPlayEnv | ratio |")
    print("|---|---|---|---|")
    for game_id in ids:
        vec, loop = seat_vector_rate(game_id, 64, 200)
        print(f"| {game_id} | {vec:,.0f} | {loop:,.0f} | {vec / loop:.2f}× |")


if __name__ == "__main__":
    main()
