"""Which tree does an entropy-regularised optimal policy play on GuessTheNumber-easy?

Exact dynamic programming over the game (1-10, 4 turns, GEM's partial credit at the turn
limit, the discount of ReBN gamma = 0.9), no learning: for a temperature tau, the soft-optimal
policy maximises the expected discounted return plus tau times the entropy of its moves (on
the turns given), ``V(s) = tau log sum_a exp(Q(s, a) / tau)``. The script prints the success
of that policy's most likely move at every node (its greedy tree) and of the policy itself.

It shows why an entropy bonus strong enough to explore also teaches the edge move that costs
binary search its last leaf: a noisy last turn favours the moves insured by the partial
credit (a near miss still pays up to 0.89). See docs/results.md, section "Why the last leaf is
hard: GEM's partial credit" (docs/results.md#why-the-last-leaf-is-hard-gems-partial-credit).

    .venv/bin/python benchmarks/guess_soft_optimum.py
"""

from __future__ import annotations

import argparse
from functools import cache

import numpy as np

LOW, HIGH, TURNS, GAMMA = 1, 10, 4, 0.9
MOVES = np.arange(LOW, HIGH + 1)


def solve(
    tau: float, soft_turns: frozenset[int], partial_credit: bool = True
) -> tuple[float, float]:
    """(greedy success, sampled success) of the soft-optimal policy at ``tau`` (the bonus
    applies at the turns in ``soft_turns``, 1-based; the other turns play the best move).
    ``partial_credit=False``: a miss at the turn limit pays 0, as the env's keyword does."""

    @cache
    def q(lo: int, hi: int, turn: int, guessed: frozenset[int]) -> np.ndarray:
        out = np.zeros(len(MOVES))
        for i, g in enumerate(MOVES):
            total = 0.0
            for target in range(lo, hi + 1):
                if g == target:
                    total += 1.0
                elif turn == TURNS:  # partial credit for a new guess at the turn limit
                    if partial_credit and g not in guessed:
                        total += 1 - abs(g - target) / (HIGH - LOW)
                else:
                    nlo, nhi = (lo, min(hi, g - 1)) if target < g else (max(lo, g + 1), hi)
                    total += GAMMA * v(nlo, nhi, turn + 1, guessed | {int(g)})
            out[i] = total / (hi - lo + 1)
        return out

    @cache
    def policy(lo: int, hi: int, turn: int, guessed: frozenset[int]) -> np.ndarray:
        values = q(lo, hi, turn, guessed)
        if tau == 0 or turn not in soft_turns:
            p = np.zeros(len(MOVES))
            p[int(np.argmax(values))] = 1.0
            return p
        z = np.exp((values - values.max()) / tau)
        return z / z.sum()

    def v(lo: int, hi: int, turn: int, guessed: frozenset[int]) -> float:
        values = q(lo, hi, turn, guessed)
        if tau == 0 or turn not in soft_turns:
            return float(values.max())
        return float(values.max() + tau * np.log(np.exp((values - values.max()) / tau).sum()))

    def success(
        lo: int, hi: int, turn: int, guessed: frozenset[int], target: int, greedy: bool
    ) -> float:
        p = policy(lo, hi, turn, guessed)
        if greedy:
            p = np.eye(len(MOVES))[int(np.argmax(q(lo, hi, turn, guessed)))]
        total = 0.0
        for i in np.flatnonzero(p > 1e-9):
            g = int(MOVES[i])
            if g == target:
                total += p[i]
            elif turn < TURNS:
                nlo, nhi = (lo, min(hi, g - 1)) if target < g else (max(lo, g + 1), hi)
                total += p[i] * success(nlo, nhi, turn + 1, guessed | {g}, target, greedy)
        return total

    targets = range(LOW, HIGH + 1)
    start = (LOW, HIGH, 1, frozenset[int]())
    greedy = float(np.mean([success(*start, t, True) for t in targets]))
    sampled = float(np.mean([success(*start, t, False) for t in targets]))
    return greedy, sampled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taus", type=float, nargs="+", default=[0, 0.02, 0.05, 0.1, 0.2, 0.3])
    ap.add_argument(
        "--no-partial-credit", action="store_true", help="a miss at the turn limit pays 0"
    )
    args = ap.parse_args()
    rows = [
        ("turns 1-4", frozenset({1, 2, 3, 4})),
        ("turns 1-3", frozenset({1, 2, 3})),
        ("turns 1-2", frozenset({1, 2})),
    ]
    print(
        "tau (return units); greedy tree's success / the soft policy's own, by the turns the bonus is on"
    )
    print("  tau  " + "".join(f"{name:>20}" for name, _ in rows))
    for tau in args.taus:
        cells = []
        for _, turns in rows:
            g, s = solve(tau, turns, partial_credit=not args.no_partial_credit)
            cells.append(f"{g:8.0%} / {s:5.1%}")
        print(f"{tau:5.2f}  " + "".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
