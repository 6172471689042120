"""Reference scoring: a frozen copy of the weights RL started from, and the batch's log-probs,
entropies and token masks that the KL penalty and the entropy bonus need."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from gemgym.rl.tokens import TokenizedEpisode
from gemgym.rl.trainer.config import TrainConfig
from gemgym.rl.trainer.logprobs import (
    log_probs,
    padded_targets,
    token_log_probs,
    token_log_probs_and_entropy,
)
from gemgym.rl.trainer.losses import ReferenceDistribution

__all__ = ["ReferenceScorer"]


class ReferenceScorer:
    """Scores padded batches of tokenized episodes for a policy ``model``.

    The reference model (for ``kl.coef`` and ``entropy.ref_min``) is a frozen copy of ``model``
    made by the first :meth:`reference` call: the weights RL starts from.
    """

    def __init__(
        self,
        model: Any,
        config: TrainConfig,
        *,
        pad_id: int,
        max_length: int | None,
        vocab_limit: int | None,
        device: Any,
    ) -> None:
        self.model = model
        self.config = config
        self.pad_id = pad_id
        self.max_length = max_length
        self.vocab_limit = vocab_limit
        self.device = device
        self.ref_model: Any = None

    def reference(self) -> Any:
        """The reference model of ``kl.coef`` and ``entropy.ref_min`` (a frozen copy of the
        weights RL started from, made on the first call)."""
        if self.ref_model is None:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        return self.ref_model

    def reference_scores(
        self, tokens: Sequence[TokenizedEpisode], *, kl_on: bool, entropy_on: bool
    ) -> tuple[Any, Any]:
        """The reference policy's log-probs of the action tokens (``kl_on``; else ``None``)
        and the bool mask of the action tokens the entropy bonus applies to (else ``None``):
        those where the reference's entropy is at least ``entropy.ref_min`` nats
        (``entropy_on``), and those of the first ``entropy.turns`` actions of each episode.

        With ``kl.estimator="exact"`` the reference's part is a :class:`ReferenceDistribution`
        (its whole distribution at the action tokens) instead of log-probs."""
        import torch

        cfg = self.config
        ref_logp = ent_mask = None
        if kl_on and cfg.kl.estimator == "exact":
            ids, mask = self.action_batch(tokens)
            with torch.no_grad():
                _, ent, rows = log_probs(
                    self.reference(), ids, mask, self.vocab_limit, entropy=entropy_on, rows=True
                )
            ref_logp = ReferenceDistribution.from_mask(rows, mask)
            if entropy_on:
                ent_mask = mask & (ent >= cfg.entropy.ref_min)
        elif entropy_on:
            logp, ent, mask = self.score_with_entropy(self.reference(), tokens)
            ent_mask = mask & (ent >= cfg.entropy.ref_min)
            ref_logp = logp if kl_on else None
        elif kl_on:
            ref_logp = self.score(self.reference(), tokens)
        if cfg.entropy.turns is not None:
            turns = self.turn_mask(tokens, cfg.entropy.turns)
            ent_mask = turns if ent_mask is None else ent_mask & turns
        return ref_logp, ent_mask

    def turn_mask(self, tokens: Sequence[TokenizedEpisode], k: int) -> Any:
        """The bool mask (as targets: ``(batch, length - 1)``) of the tokens of each episode's
        first ``k`` actions."""
        return self.padded(tokens, [(t.turn_index >= 0) & (t.turn_index < k) for t in tokens])[1]

    def action_batch(self, tokens: Sequence[TokenizedEpisode]) -> tuple[Any, Any]:
        """The padded id tensor of ``tokens`` and the bool mask of its action tokens (as
        targets: ``(batch, length - 1)``)."""
        return self.padded(tokens, [t.action_mask for t in tokens])

    def padded(
        self, tokens: Sequence[TokenizedEpisode], masks: Sequence[np.ndarray]
    ) -> tuple[Any, Any]:
        """:func:`~gemgym.rl.trainer.logprobs.padded_targets` with this scorer's padding,
        length and device."""
        return padded_targets(tokens, masks, self.pad_id, self.max_length, self.device)

    def score(self, model: Any, tokens: Sequence[TokenizedEpisode]) -> Any:
        """``model``'s log-probs of the action tokens of the padded batch (0 elsewhere)."""
        import torch

        ids, mask = self.action_batch(tokens)
        with torch.no_grad():
            return token_log_probs(model, ids, mask, self.vocab_limit)

    def score_with_entropy(
        self, model: Any, tokens: Sequence[TokenizedEpisode]
    ) -> tuple[Any, Any, Any]:
        """As :meth:`score`, with ``model``'s entropy at the same tokens and the action mask."""
        import torch

        ids, mask = self.action_batch(tokens)
        with torch.no_grad():
            logp, ent = token_log_probs_and_entropy(model, ids, mask, self.vocab_limit)
        return logp, ent, mask
