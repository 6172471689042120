"""Evaluation: the policy plays fresh episodes, on seeds that training never uses."""

from __future__ import annotations

from gemgym.experience import Episode, summarize
from gemgym.rl.trainer.collection import make_collector
from gemgym.rl.trainer.config import TrainConfig
from gemgym.rl.trainer.policy import LMPolicy

__all__ = ["EVAL_SEED_BASE", "evaluate_policy"]

EVAL_SEED_BASE = 1_000_000_000
"""Evaluation episodes use seeds from here on; training seeds stay far below."""


def evaluate_policy(
    policy: LMPolicy,
    config: TrainConfig,
    episodes: int,
    *,
    seed: int = EVAL_SEED_BASE,
    greedy: bool = False,
) -> dict[str, float]:
    """Play ``episodes`` episodes of the config's env from seed ``seed`` on with ``policy``,
    sampling at ``eval.temperature`` (default: as the training batches are sampled), or taking
    the most likely token (``greedy=True``); the policy's sampling settings are restored after.
    Returns :func:`~gemgym.experience.summarize` of the episodes (failed ones included, as
    unsuccessful, with their count in ``errors``)."""
    batch_size = min(episodes, max(64, config.rl.episodes_per_update))
    out: list[Episode] = []
    was = policy.greedy, policy.temperature, policy.min_p
    policy.greedy = greedy
    if config.eval.temperature is not None:  # the policy's own distribution, tempered
        policy.temperature, policy.min_p = config.eval.temperature, 0.0
    try:
        with make_collector(config, policy, batch_size, seed=seed) as col:
            while len(out) < episodes:
                col.collect(min(batch_size, episodes - len(out)))
                out.extend(col.records)  # failed episodes too: they count as unsuccessful
    finally:
        policy.greedy, policy.temperature, policy.min_p = was
    return summarize(out)
