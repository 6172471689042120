"""RL building blocks: per-turn returns, advantage estimators, token weights, a collector.

Everything here needs only numpy; the reference trainer (:mod:`gemgym.rl.trainer`, torch +
transformers, ``pip install "gemgym[train]"``) is imported only when used. See ``docs/rl.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gemgym._lazy import lazy_exports

if TYPE_CHECKING:
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
    from gemgym.rl.collector import (
        Batch,
        BatchPolicy,
        Collector,
    )
    from gemgym.rl.tokens import (
        Segment,
        TokenizedEpisode,
        pad_batch,
        token_weights,
        tokenize_segments,
    )

_EXPORTS: dict[str, str] = {
    "ESTIMATORS": "gemgym.rl.advantages",
    "GROUP_ESTIMATORS": "gemgym.rl.advantages",
    "compute_advantages": "gemgym.rl.advantages",
    "discounted_returns": "gemgym.rl.advantages",
    "drgrpo_advantages": "gemgym.rl.advantages",
    "gae_advantages": "gemgym.rl.advantages",
    "grpo_advantages": "gemgym.rl.advantages",
    "rebn_advantages": "gemgym.rl.advantages",
    "rebn_group_advantages": "gemgym.rl.advantages",
    "reinforce_advantages": "gemgym.rl.advantages",
    "rloo_advantages": "gemgym.rl.advantages",
    "Batch": "gemgym.rl.collector",
    "BatchPolicy": "gemgym.rl.collector",
    "Collector": "gemgym.rl.collector",
    "Segment": "gemgym.rl.tokens",
    "TokenizedEpisode": "gemgym.rl.tokens",
    "pad_batch": "gemgym.rl.tokens",
    "token_weights": "gemgym.rl.tokens",
    "tokenize_segments": "gemgym.rl.tokens",
}

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


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
