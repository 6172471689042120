"""Losses: the policy gradient, PPO's clipped surrogate, and the KL penalties toward a reference."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gemgym.errors import ConfigError
from gemgym.rl.tokens import TokenizedEpisode, pad_batch
from gemgym.rl.trainer.logprobs import action_positions, log_probs

__all__ = [
    "ReferenceDistribution",
    "clipped_policy_loss",
    "exact_kl_penalty",
    "kl_penalty",
    "kl_term",
    "policy_gradient_loss",
]


def policy_gradient_loss(
    model: Any,
    episodes: Sequence[TokenizedEpisode],
    weights: Sequence[np.ndarray],
    *,
    pad_id: int,
    device: Any,
    max_length: int | None = None,
    vocab_limit: int | None = None,
    entropy_coef: float = 0.0,
    kl_coef: float = 0.0,
    ref_logp: Any = None,
    entropy_mask: Any = None,
) -> Any:
    """``-sum_j w_j log pi(x_j | x_<j) / N`` over the action tokens of a batch (a torch scalar).

    With all weights 1 on action tokens this is the SFT (negative log-likelihood) loss.
    ``vocab_limit``: see :func:`token_log_probs`. ``entropy_coef=c`` subtracts ``c`` times the
    mean entropy of the policy over the same tokens (an exploration bonus; with a
    ``(batch, length - 1)`` bool ``entropy_mask``, only the masked tokens' entropy counts, still
    divided by ``N``). ``kl_coef=beta`` with ``ref_logp`` (the reference policy's
    :func:`token_log_probs` of the same padded batch at its action tokens) adds ``beta`` times
    :func:`kl_penalty`; with a :class:`ReferenceDistribution` as ``ref_logp``, ``beta`` times
    :func:`exact_kl_penalty` over the same tokens.
    """
    import torch

    ids_np, att_np, w_np = pad_batch(episodes, weights, pad_id=pad_id, max_length=max_length)
    n_action = sum(int(e.action_mask[: ids_np.shape[1]].sum()) for e in episodes)
    ids = torch.from_numpy(ids_np).to(device)
    w = torch.from_numpy(w_np).to(device=device, dtype=torch.float32)
    # Right padding: under causal attention real tokens never see the pads that follow them,
    # so the batch needs no padding mask (which keeps the fast fused attention path).
    del att_np
    mask = w[:, 1:] != 0
    if kl_coef:
        mask = mask | action_positions(episodes, pad_id, max_length, device)
    if entropy_coef and entropy_mask is not None:
        mask = mask | entropy_mask
    exact = bool(kl_coef) and isinstance(ref_logp, ReferenceDistribution)
    tok_logp, ent, rows = log_probs(
        model, ids, mask, vocab_limit, entropy=bool(entropy_coef), rows=exact
    )
    if ent is not None and entropy_mask is not None:
        ent = ent * entropy_mask
    gain = w[:, 1:] * tok_logp if ent is None else w[:, 1:] * tok_logp + entropy_coef * ent
    loss = -gain.sum() / max(1, n_action)
    if kl_coef:
        loss = loss + kl_coef * kl_term(tok_logp, rows, _require_ref(ref_logp), mask)
    return loss


def kl_penalty(logp: Any, ref_logp: Any, mask: Any, count: int | None = None) -> Any:
    """The mean over the ``mask``ed tokens of GRPO's per-token KL estimator
    ``exp(ref - logp) - (ref - logp) - 1`` (a torch scalar, >= 0; 0 where ``logp == ref``);
    ``count``: divide the sum by this instead of the number of masked tokens (for a chunk of
    a larger batch).

    ``logp``, ``ref_logp``: log-probs of the sampled tokens under the policy and the reference.
    An unbiased estimate of ``KL(pi || pi_ref)`` on tokens sampled from ``pi``; its gradient is
    ``(1 - pi_ref / pi) grad log pi``, which lowers a token the policy favours more than the
    reference does and raises one it favours less.
    """
    import torch

    d = torch.where(mask, ref_logp - logp, torch.zeros_like(logp))  # k3 is 0 where d is
    n = torch.clamp(mask.sum(), min=1) if count is None else max(1, count)
    return (torch.exp(d) - d - 1.0).sum() / n


class ReferenceDistribution:
    """The reference policy's whole next-token distribution at the action tokens of a padded
    batch, for ``kl_estimator="exact"``.

    ``rows``: its log-softmax, ``(n, vocab)``, one row per action token in the row-major order
    of the batch's ``(batch, length - 1)`` action mask; ``index``: that mask's
    ``(batch, length - 1)`` long tensor of each position's row (-1 elsewhere). Indexed like a
    ``(batch, length - 1)`` tensor (``ref[rows, :n]``), it gives the reference for that part
    of the batch (the rows are shared, not copied).
    """

    def __init__(self, rows: Any, index: Any) -> None:
        self.rows = rows
        self.index = index

    @classmethod
    def from_mask(cls, rows: Any, mask: Any) -> ReferenceDistribution:
        """The distribution of ``rows`` (one per ``True`` of the bool ``mask``, row-major)."""
        import torch

        index = torch.full(mask.shape, -1, dtype=torch.long, device=mask.device)
        index[mask] = torch.arange(int(mask.sum()), device=mask.device)
        return cls(rows, index)

    def __getitem__(self, key: Any) -> ReferenceDistribution:
        return ReferenceDistribution(self.rows, self.index[key])

    def at(self, mask: Any) -> Any:
        """The log-softmax rows at the ``mask``ed positions (row-major), which must all be
        action tokens of the batch the reference scored."""
        idx = self.index[mask]
        if bool((idx < 0).any()):
            raise ValueError("the mask covers positions the reference did not score")
        return self.rows[idx]


def exact_kl_penalty(logp_rows: Any, ref_rows: Any, count: int | None = None) -> Any:
    """``KL(pi_ref || pi) = sum_v pi_ref(v) (log pi_ref(v) - log pi(v))`` computed over the
    whole vocabulary at each token, summed over the tokens and divided by ``count`` (default:
    their number): a torch scalar >= 0.

    ``logp_rows``, ``ref_rows``: ``(tokens, vocab)`` log-softmax rows of the policy and of
    the reference. Its gradient on the policy's logits is ``pi - pi_ref`` at every token: the
    same in expectation as :func:`kl_penalty`'s on sampled tokens, without the sampling noise,
    so it pulls a move the policy has given up back toward the reference's probability at every
    step, not only on the rare steps that sample it.
    """
    import torch

    n = max(1, int(ref_rows.shape[0]) if count is None else count)
    kl = (torch.exp(ref_rows) * (ref_rows - logp_rows)).sum()
    return kl / n


def kl_term(logp: Any, rows: Any, ref: Any, mask: Any, count: int | None = None) -> Any:
    """The KL penalty of the loss: exact (``ref`` a :class:`ReferenceDistribution`, ``rows``
    the policy's log-softmax rows at ``mask``) or GRPO's k3 on the sampled tokens."""
    if isinstance(ref, ReferenceDistribution):
        n = int(mask.sum()) if count is None else count
        return exact_kl_penalty(rows, ref.at(mask), n)
    return kl_penalty(logp, ref, mask, count)


def _require_ref(ref_logp: Any) -> Any:
    if ref_logp is None:
        raise ConfigError("kl_coef > 0 needs ref_logp: the reference policy's log-probs")
    return ref_logp


def clipped_policy_loss(
    model: Any,
    ids: Any,
    weights: Any,
    old_logp: Any,
    *,
    clip_eps: float = 0.2,
    dual_clip: float | None = None,
    vocab_limit: int | None = None,
    entropy_coef: float = 0.0,
    kl_coef: float = 0.0,
    ref_logp: Any = None,
    action_mask: Any = None,
    counts: tuple[int, int] | None = None,
    entropy_mask: Any = None,
) -> Any:
    """PPO's clipped surrogate with token weights as advantages (a torch scalar).

    ``-(1/N) sum_j min(r_j w_j, clip(r_j, 1 - eps, 1 + eps) w_j)`` with
    ``r_j = pi(x_j | x_<j) / pi_old(x_j | x_<j)``, over the ``N`` tokens with a nonzero weight
    (action tokens; ``ids``, ``weights`` are ``(batch, length)``, ``old_logp`` is
    ``(batch, length - 1)`` from :func:`token_log_probs` of the collecting policy). At
    ``r = 1`` its gradient is that of :func:`policy_gradient_loss`. ``dual_clip=c`` (> 1) also
    bounds a token with a negative weight at ``c w_j`` (dual-clip PPO): without it, a token the
    policy has made much likelier since it was sampled contributes ``r_j w_j`` without limit.
    ``entropy_coef=c`` subtracts ``c`` times the policy's mean entropy over the same tokens (only
    the ``entropy_mask``ed ones count when that ``(batch, length - 1)`` bool mask is given).
    ``kl_coef=beta`` adds ``beta`` times :func:`kl_penalty` against ``ref_logp`` over the
    ``(batch, length - 1)`` bool ``action_mask`` (all action tokens, zero weights included), or
    :func:`exact_kl_penalty` when ``ref_logp`` is a :class:`ReferenceDistribution`.
    ``counts=(N, M)``: divide by these numbers of weighted and of KL tokens instead of this
    batch's own, so that the losses of a batch's chunks add up to the batch's loss.
    """
    import torch

    w = weights[:, 1:]
    mask = w != 0
    if kl_coef:
        if action_mask is None:
            raise ConfigError("kl_coef > 0 needs action_mask: the action tokens of the batch")
        mask = mask | action_mask
    if entropy_coef and entropy_mask is not None:
        mask = mask | entropy_mask
    exact = bool(kl_coef) and isinstance(ref_logp, ReferenceDistribution)
    logp, ent, rows = log_probs(
        model, ids, mask, vocab_limit, entropy=bool(entropy_coef), rows=exact
    )
    if ent is not None and entropy_mask is not None:
        ent = ent * entropy_mask
    ratio = torch.exp(logp - old_logp)
    surr = torch.minimum(ratio * w, torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * w)
    if dual_clip is not None:  # a negative advantage's term is otherwise unbounded in r
        surr = torch.where(w < 0, torch.maximum(surr, dual_clip * w), surr)
    n = torch.clamp((w != 0).sum(), min=1) if counts is None else max(1, counts[0])
    if ent is not None:
        surr = surr + entropy_coef * ent
    loss = -surr.sum() / n
    if kl_coef:
        kl_count = None if counts is None else counts[1]
        loss = loss + kl_coef * kl_term(logp, rows, _require_ref(ref_logp), mask, kl_count)
    return loss
