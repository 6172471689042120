"""RL building blocks: per-turn returns, advantage estimators, token weights, a collector.

Everything here needs only numpy; the reference trainer (:mod:`gemgym.rl.trainer`, torch +
transformers, ``pip install "gemgym[train]"``) is imported only when used. See ``docs/rl.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports

if TYPE_CHECKING:
    from gemgym.rl.advantages import (
        ESTIMATORS as ESTIMATORS,
        GROUP_ESTIMATORS as GROUP_ESTIMATORS,
        compute_advantages as compute_advantages,
        discounted_returns as discounted_returns,
        drgrpo_advantages as drgrpo_advantages,
        gae_advantages as gae_advantages,
        grpo_advantages as grpo_advantages,
        rebn_advantages as rebn_advantages,
        rebn_group_advantages as rebn_group_advantages,
        reinforce_advantages as reinforce_advantages,
        rloo_advantages as rloo_advantages,
    )
    from gemgym.rl.collector import (
        Batch as Batch,
        BatchPolicy as BatchPolicy,
        Collector as Collector,
    )
    from gemgym.rl.tokens import (
        Segment as Segment,
        TokenizedEpisode as TokenizedEpisode,
        pad_batch as pad_batch,
        token_weights as token_weights,
        tokenize_segments as tokenize_segments,
    )


__getattr__, __dir__ = lazy_exports(globals())
