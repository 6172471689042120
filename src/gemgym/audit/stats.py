"""The flag rule: does an exploit beat the random agent, beyond chance?

An exploit is **flagged** when both hold:

* its mean episode return exceeds the random agent's by more than ``margin`` (default 0.01: a
  float-noise floor, not a tolerance for paying exploits), and
* a one-sided two-sample **permutation test** of "exploit mean > random mean" gives
  ``p < alpha`` (default 0.01).

The permutation test makes no assumption about the reward distribution (0/1 rewards, shaped
game rewards, ties, zero variance all work): ``p`` is the share of the ways to split the pooled
returns into two groups of the original sizes whose difference of means is at least the one
observed. It is exact (every split enumerated) when there are at most
:data:`EXACT_LIMIT` splits, else estimated from :data:`ROUNDS` random splits drawn from a
:class:`random.Random` seeded by the caller (``p = (1 + hits) / (1 + rounds)``).

The smallest ``p`` with ``n`` episodes on each side is ``1 / C(2n, n)``: 0.05 for ``n = 3``,
0.014 for ``n = 4``, 0.004 for ``n = 5``, 0.001 for ``n = 6``. So at ``alpha = 0.01`` an exploit
needs at least 5 episodes to be flagged at all; :func:`min_episodes` says how many.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

__all__ = ["EXACT_LIMIT", "ROUNDS", "mean", "min_episodes", "permutation_p"]

EXACT_LIMIT = 20_000
ROUNDS = 10_000
_EPS = 1e-9


def mean(xs: Sequence[float]) -> float:
    """The mean of ``xs`` (0.0 when empty)."""
    return sum(xs) / len(xs) if xs else 0.0


def permutation_p(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> float:
    """One-sided p-value of ``mean(a) > mean(b)`` by a permutation test (see the module)."""
    if not a or not b:
        return 1.0
    pooled = list(a) + list(b)
    n, total = len(a), sum(pooled)
    observed = mean(a) - mean(b)

    def diff(sum_a: float) -> float:
        return sum_a / n - (total - sum_a) / len(b)

    splits = math.comb(len(pooled), n)
    if splits <= EXACT_LIMIT:
        hits = sum(
            diff(sum(pooled[i] for i in idx)) >= observed - _EPS
            for idx in itertools.combinations(range(len(pooled)), n)
        )
        return hits / splits
    rng = random.Random(seed)
    hits = 0
    for _ in range(ROUNDS):
        if diff(sum(rng.sample(pooled, n))) >= observed - _EPS:
            hits += 1
    return (1 + hits) / (1 + ROUNDS)


def min_episodes(alpha: float) -> int:
    """The fewest episodes per side with which a permutation test can reach ``p < alpha``."""
    n = 1
    while 1 / math.comb(2 * n, n) >= alpha:
        n += 1
    return n
