"""Supervised fine-tuning: the warm start that maximises the likelihood of recorded actions."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from gemgym.errors import ConfigError
from gemgym.experience import Episode
from gemgym.rl.tokens import TokenizedEpisode

__all__ = ["SFT_REPORTS", "supervised_fine_tune"]

SFT_REPORTS = 10
"""How many progress lines a fine-tuning run logs (about one per tenth of its steps)."""

StepFn = Callable[[Sequence[TokenizedEpisode], Sequence[np.ndarray]], float]


def supervised_fine_tune(
    episodes: Sequence[Episode],
    steps: int,
    *,
    tokenize: Callable[[Episode], TokenizedEpisode],
    step: StepFn,
    batch_size: int,
    seed: int,
    max_length: int | None,
    log: Callable[[str], None] | None = None,
    start: int = 0,
    after_step: Callable[[int], bool] | None = None,
) -> float:
    """``steps`` steps of ``step(tokens, weights)`` (the negative log-likelihood of the action
    tokens: weights 1 on them) on random minibatches of ``batch_size`` episodes (drawn with
    ``seed``); returns the last step's loss (NaN when no step ran). ``log`` receives about
    :data:`SFT_REPORTS` progress lines (step, loss, time spent and left).

    ``start``: the steps already done (a resumed run): the minibatches go on where they were,
    as if the run had not stopped. ``after_step(i)`` is called after step ``i`` (1-based) and
    once before the first step with ``i = start``; when it returns true the fine-tuning stops
    there (an interrupted run saves its checkpoint)."""
    if not episodes:
        raise ConfigError("no episodes to fine-tune on: give a JSONL file of recorded episodes")
    tokens = [tokenize(e) for e in episodes]
    long = sum(len(t) > max_length for t in tokens) if max_length else 0
    if long:
        warnings.warn(
            f"{long} of {len(tokens)} SFT episodes are longer than the model's "
            f"{max_length} positions; only their first {max_length} tokens are "
            "learned. Give the model more positions (policy.n_positions) or keep fewer tokens "
            "of each observation (policy.obs_max_tokens).",
            stacklevel=3,
        )
    if not 0 <= start <= steps:
        raise ConfigError(f"start must be in [0, steps={steps}], got {start}")
    rng = np.random.default_rng(seed)
    loss = math.nan
    bs = min(batch_size, len(tokens))
    for _ in range(start):  # the minibatches of the steps already done
        rng.choice(len(tokens), size=bs, replace=False)
    every = max(1, math.ceil(steps / SFT_REPORTS))
    began = time.perf_counter()
    if after_step is not None and after_step(start):
        return loss
    for i in range(start + 1, steps + 1):
        idx = rng.choice(len(tokens), size=bs, replace=False)
        batch = [tokens[j] for j in idx]
        loss = step(batch, [t.action_mask.astype(np.float64) for t in batch])
        if log is not None and (i % every == 0 or i == steps):
            spent = time.perf_counter() - began
            left = spent / (i - start) * (steps - i)
            log(f"SFT step {i}/{steps}: loss {loss:.3f}  ({spent:.0f} s, about {left:.0f} s left)")
        if after_step is not None and after_step(i):
            break
    return loss
