"""RL building blocks: per-turn returns, advantage estimators, token weights, a collector.

Everything here needs only numpy; the reference trainer (:mod:`gemgym.rl.trainer`, torch +
transformers, ``pip install "gemgym[train]"``) is imported only when used. See ``docs/rl.md``.
"""

from gemgym.rl.advantages import (
    ESTIMATORS,
    GROUP_ESTIMATORS,
    compute_advantages,
    discounted_returns,
    drgrpo_advantages,
    gae_advantages,
    grpo_advantages,
    rebn_advantages,
    rebn_group_advantages,
    reinforce_advantages,
    rloo_advantages,
)
from gemgym.rl.collector import Batch, BatchPolicy, Collector
from gemgym.rl.tokens import (
    Segment,
    TokenizedEpisode,
    pad_batch,
    token_weights,
    tokenize_segments,
)

__all__ = [
    "ESTIMATORS",
    "GROUP_ESTIMATORS",
    "Batch",
    "BatchPolicy",
    "Collector",
    "Segment",
    "TokenizedEpisode",
    "compute_advantages",
    "discounted_returns",
    "drgrpo_advantages",
    "gae_advantages",
    "grpo_advantages",
    "pad_batch",
    "rebn_advantages",
    "rebn_group_advantages",
    "reinforce_advantages",
    "rloo_advantages",
    "token_weights",
    "tokenize_segments",
]
