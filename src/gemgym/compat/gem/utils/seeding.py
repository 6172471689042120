"""``gem.utils.seeding``: ``np_random``, ``set_seed`` and ``RNG``."""

from __future__ import annotations

import random

import numpy as np

__all__ = ["RNG", "RandomNumberGenerator", "np_random", "set_seed"]

RNG = RandomNumberGenerator = np.random.Generator


def np_random(seed: int | None = None) -> tuple[np.random.Generator, int]:
    """A numpy generator seeded from ``seed`` (OS entropy when ``None``), and the seed used."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    seq = np.random.SeedSequence(seed)
    entropy = seq.entropy
    return np.random.Generator(np.random.PCG64(seq)), int(entropy)  # type: ignore[arg-type]


def set_seed(seed: int | None = None) -> None:
    """Seed Python's and numpy's global generators (what GEM's envs draw from)."""
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
