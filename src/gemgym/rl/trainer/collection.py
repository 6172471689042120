"""Collection of the training batches, in the foreground or (``run.overlap``) in a background
thread.

With ``run.overlap=True`` the batch of update ``k + 1`` is collected by a thread, with a copy of the
policy as it was before update ``k``'s step, while the learner takes that step; the copy is
refreshed after every step. A pending collection that is thrown away (the run ends, or is
saved) is replayed after a resume: :meth:`BatchCollection.state` gives the collector's seeds and
the sampling generator as they were before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from gemgym.rl.collector import Batch, Collector
from gemgym.rl.tokens import TokenizedEpisode
from gemgym.rl.trainer.config import TrainConfig
from gemgym.rl.trainer.policy import LMPolicy
from gemgym.rl.trainer.reference import ReferenceScorer
from gemgym.wrappers.factory import get_wrapper_fns

__all__ = ["BatchCollection", "ScoredBatch", "make_collector"]


def make_collector(
    config: TrainConfig, policy: LMPolicy, num_envs: int, *, seed: int, group_size: int = 1
) -> Collector:
    """A collector of ``num_envs`` envs of the config's env (and ``env_kwargs``) for ``policy``,
    which sees the episodes in progress (a :class:`~gemgym.rl.trainer.hf_policy.ChatPolicy`
    plays as an engine policy: every episode of a batch in flight at once)."""
    return Collector(
        config.run.env_id,
        policy,
        num_envs=num_envs,
        group_size=group_size,
        seed=seed,
        history=True,
        env_kwargs=config.run.env_kwargs,
        wrappers=get_wrapper_fns(config.run.wrappers) if config.run.wrappers else None,
        keep_errors=config.rl.keep_errors,
    )


class ScoredBatch(NamedTuple):
    """A collected batch with what learning from it needs."""

    batch: Batch
    tokens: list[TokenizedEpisode]
    behaviour: Any
    """The collecting policy's log-probs of the action tokens, ``(batch, length - 1)``."""
    reference: Any
    """The reference's log-probs (or :class:`~gemgym.rl.trainer.ReferenceDistribution`)."""
    entropy_mask: Any
    """The tokens the entropy bonus applies to (or ``None``)."""


class BatchCollection:
    """Collects batches with ``rollout_policy`` (the learner's ``policy`` itself, or a copy of
    it for ``run.overlap``) through ``collector``.

    ``reference_scores(tokens)`` gives the reference's part of a batch's scores (see
    :meth:`ReferenceScorer.reference_scores`); ``scorer`` scores what the policy did not record.
    """

    def __init__(
        self,
        collector: Collector,
        *,
        policy: LMPolicy,
        rollout_policy: LMPolicy,
        scorer: ReferenceScorer,
        reference_scores: Callable[[Sequence[TokenizedEpisode]], tuple[Any, Any]],
    ) -> None:
        self.collector = collector
        self.policy = policy
        self.rollout_policy = rollout_policy
        self.scorer = scorer
        self.reference_scores = reference_scores
        self._pending: Future[ScoredBatch] | None = None
        self._resume_point: tuple[dict[str, int], Any] = ({"next_group": 0}, None)
        self._pool: ThreadPoolExecutor | None = None

    @property
    def in_flight(self) -> bool:
        """Whether a background collection was started and not yet used or drained."""
        return self._pending is not None

    @property
    def thread_running(self) -> bool:
        """Whether the background collection thread exists (``run.overlap``, until :meth:`stop`)."""
        return self._pool is not None

    def collect_scored(self, episodes: int) -> ScoredBatch:
        """Collect with the rollout policy and score the batch's tokens with it: the batch, its
        tokens, the collecting policy's log-probs of the action tokens, and what
        ``reference_scores`` gives."""
        batch = self.collector.collect(episodes)
        tokens = [self.rollout_policy.tokenize(e) for e in batch.episodes]
        logp = self.recorded_log_probs(batch, tokens)
        if logp is None:
            logp = self.scorer.score(self.rollout_policy.model, tokens)
        ref, ent_mask = self.reference_scores(tokens)
        return ScoredBatch(batch, tokens, logp, ref, ent_mask)

    def next_overlapped(self, episodes: int) -> ScoredBatch:
        """The batch to learn from now (the one the thread collected meanwhile, or on the first
        call one collected here), after which the thread starts collecting the next one with
        the learner's current weights."""
        pending, self._pending = self._pending, None
        scored = pending.result() if pending is not None else None
        self.sync_rollout_policy()  # the collector is idle: give it the learner's weights
        if scored is None:  # the first update collects in the foreground
            scored = self.collect_scored(episodes)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="gemgym-collect")
        # where a resumed run starts collecting again: the pending batch is not saved
        self._resume_point = (
            self.collector.state_dict(),
            self.rollout_policy.generator.get_state(),
        )
        self._pending = self._pool.submit(self.collect_scored, episodes)
        return scored

    def recorded_log_probs(self, batch: Batch, tokens: Sequence[TokenizedEpisode]) -> Any:
        """The rollout policy's log-probs of the batch's action tokens as it recorded them while
        sampling, laid out as :meth:`ReferenceScorer.score` computes them (``None`` if some are
        missing): the same values up to float rounding, without a second forward pass."""
        import torch

        recorded = [self.rollout_policy.sampled_log_probs(e) for e in batch.episodes]
        length = max((len(t) for t in tokens), default=0)
        max_length = self.scorer.max_length
        if max_length is not None:
            length = min(length, max_length)
        out = np.zeros((len(tokens), max(length - 1, 0)), dtype=np.float32)
        for i, (tok, rec) in enumerate(zip(tokens, recorded, strict=True)):
            pos = np.flatnonzero(tok.action_mask)
            if rec is None or len(rec) != len(pos):
                return None
            keep = (pos >= 1) & (pos < length)
            out[i, pos[keep] - 1] = np.asarray(rec, dtype=np.float32)[keep]
        return torch.from_numpy(out).to(self.scorer.device)

    def sync_rollout_policy(self) -> None:
        """Copy the learner's weights into the rollout policy's model (``run.overlap`` only)."""
        import torch

        if self.rollout_policy is not self.policy:
            with torch.no_grad():
                for dst, src in zip(
                    self.rollout_policy.model.parameters(),
                    self.policy.model.parameters(),
                    strict=True,
                ):
                    dst.copy_(src)

    def state(self) -> tuple[dict[str, int], Any]:
        """Where a resumed run starts collecting: the collector's :meth:`~Collector.state_dict`
        and the rollout policy's sampling generator state, as before the pending collection
        when one is in flight."""
        if self._pending is not None:
            return self._resume_point
        return self.collector.state_dict(), self.rollout_policy.generator.get_state()

    def restore(self, collector_state: dict[str, int], sample_rng: Any) -> None:
        """Continue from a :meth:`state`."""
        self.collector.load_state_dict(collector_state)
        self.rollout_policy.generator.set_state(sample_rng)

    def drain(self) -> None:
        """Wait for a background collection to end and forget its batch (``run.overlap`` only)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()
            # rewind: the next collection replays these seeds and samples
            self.restore(*self._resume_point)

    def stop(self) -> None:
        """Drain the background collection and end its thread (``run.overlap`` only)."""
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
