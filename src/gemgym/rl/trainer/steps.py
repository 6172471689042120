"""Optimiser steps: one policy-gradient step, or PPO-style clipped steps over one batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gemgym.rl.tokens import TokenizedEpisode, pad_batch
from gemgym.rl.trainer.logprobs import action_positions, token_log_probs
from gemgym.rl.trainer.losses import clipped_policy_loss, policy_gradient_loss

__all__ = ["LEARN_CHUNK_EPISODES", "Learner", "length_chunks"]

LEARN_CHUNK_EPISODES = 16


def length_chunks(lengths: np.ndarray, idx: np.ndarray) -> list[np.ndarray]:
    """``idx`` (episode indices) sorted by length and cut into chunks of about
    :data:`LEARN_CHUNK_EPISODES` (at most 4 chunks): each chunk is padded to its own longest
    episode, not the batch's, which saves the padding's work (attention grows with the
    square of the length). The chunks' gradients add up to the whole batch's."""
    order = idx[np.argsort(lengths[idx], kind="stable")]
    k = min(4, max(1, len(order) // LEARN_CHUNK_EPISODES))
    return [c for c in np.array_split(order, k) if len(c)]


class Learner:
    """Takes the optimiser's steps on ``model`` (AdamW ``optimizer``, gradients clipped to
    ``max_grad_norm`` when it is > 0), on batches padded with ``pad_id`` to at most
    ``max_length`` tokens, normalised over the first ``vocab_limit`` ids."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        *,
        pad_id: int,
        max_length: int | None,
        vocab_limit: int | None,
        device: Any,
        max_grad_norm: float,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.pad_id = pad_id
        self.max_length = max_length
        self.vocab_limit = vocab_limit
        self.device = device
        self.max_grad_norm = max_grad_norm

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate of every parameter group."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def step(
        self,
        tokens: Sequence[TokenizedEpisode],
        weights: Sequence[np.ndarray],
        entropy_coef: float = 0.0,
        kl_coef: float = 0.0,
        ref_logp: Any = None,
        entropy_mask: Any = None,
    ) -> float:
        """One step on :func:`~gemgym.rl.trainer.policy_gradient_loss`; returns the loss."""
        import torch

        self.model.train()
        loss = policy_gradient_loss(
            self.model,
            tokens,
            weights,
            pad_id=self.pad_id,
            device=self.device,
            max_length=self.max_length,
            vocab_limit=self.vocab_limit,
            entropy_coef=entropy_coef,
            kl_coef=kl_coef,
            ref_logp=ref_logp,
            entropy_mask=entropy_mask,
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return float(loss.item())

    def ppo_steps(
        self,
        tokens: Sequence[TokenizedEpisode],
        weights: Sequence[np.ndarray],
        *,
        epochs: int,
        minibatches: int,
        clip_eps: float,
        dual_clip: float | None,
        rng: np.random.Generator,
        behaviour: Any = None,
        ref: Any = None,
        entropy_coef: float = 0.0,
        entropy_mask: Any = None,
        kl_coef: float = 0.0,
    ) -> float:
        """``epochs`` passes of ``minibatches`` clipped-surrogate steps over one batch (the
        minibatches shuffled with ``rng``), against ``behaviour`` (the collecting policy's
        log-probs) or the current policy's; ``ref``: the reference policy's log-probs (for
        ``kl_coef``); ``entropy_coef`` and ``entropy_mask``: the entropy bonus and its tokens.
        Returns the mean of the steps' losses."""
        import torch

        ids_np, _, w_np = pad_batch(tokens, weights, pad_id=self.pad_id, max_length=self.max_length)
        lengths = np.minimum([len(t) for t in tokens], ids_np.shape[1])
        ids = torch.from_numpy(ids_np).to(self.device)
        w = torch.from_numpy(w_np).to(device=self.device, dtype=torch.float32)
        if behaviour is not None:
            old = behaviour
        else:
            self.model.eval()
            with torch.no_grad():
                old = token_log_probs(self.model, ids, w[:, 1:] != 0, self.vocab_limit)
        ent_mask = entropy_mask if entropy_coef else None
        acts = None
        if kl_coef:
            acts = action_positions(tokens, self.pad_id, self.max_length, self.device)
        self.model.train()
        losses = []
        # a batch that lost failed episodes may hold fewer episodes than ``minibatches``
        splits = max(1, min(minibatches, len(tokens)))
        for _ in range(epochs):
            for idx in np.array_split(rng.permutation(len(tokens)), splits):
                rows = torch.from_numpy(idx).to(self.device)
                scored = w[rows, 1:] != 0  # the loss's tokens; with KL, all action tokens too
                kl_tokens = 0 if acts is None else int((acts[rows] | scored).sum())
                counts = (int(scored.sum()), kl_tokens)
                self.optimizer.zero_grad(set_to_none=True)
                total = 0.0
                for chunk in length_chunks(lengths, idx):  # one step, the chunks' grads summed
                    n = int(lengths[chunk].max())  # right padding: drop the all-pad tail
                    sel = torch.from_numpy(chunk).to(self.device)
                    loss = clipped_policy_loss(
                        self.model,
                        ids[sel, :n],
                        w[sel, :n],
                        old[sel, : n - 1],
                        clip_eps=clip_eps,
                        dual_clip=dual_clip,
                        vocab_limit=self.vocab_limit,
                        entropy_coef=entropy_coef,
                        kl_coef=kl_coef,
                        ref_logp=None if ref is None else ref[sel, : n - 1],
                        action_mask=None if acts is None else acts[sel, : n - 1],
                        counts=counts,
                        entropy_mask=None if ent_mask is None else ent_mask[sel, : n - 1],
                    )
                    loss.backward()
                    total += float(loss.item())
                if self.max_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                self.optimizer.step()
                losses.append(total)
        return float(np.mean(losses))
