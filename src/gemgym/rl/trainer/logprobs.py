"""Log-prob kernels: the policy's log-probs (and entropy) of the tokens of a padded batch.

The output layer runs only on the positions a loss needs, and a head of tokens that every row
shares is computed once (:class:`~gemgym.rl.trainer.tinygpt.TinyGPT` only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gemgym.rl.tokens import TokenizedEpisode, pad_batch

__all__ = [
    "MIN_SHARED_PREFIX",
    "action_positions",
    "log_probs",
    "padded_targets",
    "shared_prefix",
    "token_log_probs",
    "token_log_probs_and_entropy",
]


def action_positions(
    episodes: Sequence[TokenizedEpisode], pad_id: int, max_length: int | None, device: Any
) -> Any:
    """The ``(batch, length - 1)`` bool mask of the action tokens (as targets) of the batch that
    :func:`~gemgym.rl.pad_batch` pads with the same settings."""
    masks = [e.action_mask for e in episodes]
    return padded_targets(episodes, masks, pad_id, max_length, device)[1]


def padded_targets(
    episodes: Sequence[TokenizedEpisode],
    masks: Sequence[np.ndarray],
    pad_id: int,
    max_length: int | None,
    device: Any,
) -> tuple[Any, Any]:
    """The right-padded id tensor of ``episodes`` and ``masks`` (one bool array per episode)
    padded alongside, as targets: a ``(batch, length - 1)`` bool tensor."""
    import torch

    weights = [m.astype(np.float64) for m in masks]
    ids, _, padded = pad_batch(episodes, weights, pad_id=pad_id, max_length=max_length)
    return torch.from_numpy(ids).to(device), torch.from_numpy(padded[:, 1:] != 0).to(device)


def token_log_probs(model: Any, ids: Any, mask: Any = None, vocab_limit: int | None = None) -> Any:
    """``log pi(x_j | x_<j)`` for ``j >= 1`` of a right-padded ``(batch, length)`` id tensor.

    With a boolean ``mask`` of shape ``(batch, length - 1)``, only the masked positions are
    computed (the others are 0): the output layer runs on those positions alone, which is most
    of the saving when actions are a small part of an episode. ``vocab_limit`` normalises over
    the first ids only, as the policy samples (the codec's ``action_vocab_size``).
    """
    return log_probs(model, ids, mask, vocab_limit, entropy=False)[0]


def token_log_probs_and_entropy(
    model: Any, ids: Any, mask: Any, vocab_limit: int | None = None
) -> tuple[Any, Any]:
    """:func:`token_log_probs` and the policy's entropy ``-sum_v pi(v) log pi(v)`` at the same
    masked positions (both ``(batch, length - 1)``, 0 off the mask)."""
    logp, ent, _ = log_probs(model, ids, mask, vocab_limit, entropy=True)
    return logp, ent


def log_probs(
    model: Any, ids: Any, mask: Any, vocab_limit: int | None, *, entropy: bool, rows: bool = False
) -> tuple[Any, Any, Any]:
    """The sampled tokens' log-probs and (``entropy``) the entropy at the ``mask``ed positions,
    both ``(batch, length - 1)`` and 0 off the mask; with ``rows``, also the full log-softmax
    rows at the masked positions, ``(mask.sum(), vocab)`` in the mask's row-major order (else
    ``None``)."""
    import torch

    if hasattr(model, "get_base_model"):  # PEFT (LoRA): the adapted layers live in the base model
        model = model.get_base_model()
    head = model.get_output_embeddings() if mask is not None else None
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    softcap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    if head is None or base is None or base is model or softcap:
        logits = model(input_ids=ids).logits[:, :-1, :vocab_limit]
        logp = torch.log_softmax(logits.float(), dim=-1)
        out = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
        ent = -(logp.exp() * logp).sum(-1) if entropy else None
        if mask is not None:
            out = out * mask
            ent = ent * mask if ent is not None else None
        full = None
        if rows:
            full = logp[mask] if mask is not None else logp.reshape(-1, logp.shape[-1])
        return out, ent, full
    split = shared_prefix(base, ids, mask)
    if split:  # the rows' common head computed once; the mask's columns before it are empty
        hidden = base.forward_shared_prefix(ids, split)[:, :-1, :]
        sel = head(hidden[mask[:, split:]])[:, :vocab_limit]
    else:
        hidden = base(input_ids=ids).last_hidden_state[:, :-1, :]
        sel = head(hidden[mask])[:, :vocab_limit]
    logp = torch.log_softmax(sel.float(), dim=-1)
    picked = logp.gather(-1, ids[:, 1:][mask][:, None]).squeeze(-1)
    out = torch.zeros(mask.shape, dtype=picked.dtype, device=picked.device)
    out[mask] = picked
    full = logp if rows else None
    if not entropy:
        return out, None, full
    ent = torch.zeros_like(out)
    ent[mask] = -(logp.exp() * logp).sum(-1)
    return out, ent, full


MIN_SHARED_PREFIX = 16


def shared_prefix(base: Any, ids: Any, mask: Any) -> int:
    """Where the rows of ``ids`` stop being the same, capped at the first scored position (the
    hidden state at position ``j`` predicts token ``j + 1``, the mask's column ``j``); 0 when
    that is under :data:`MIN_SHARED_PREFIX` tokens, for one row, or when the model cannot
    share a prefix (only :class:`~gemgym.rl.trainer.tinygpt.TinyGPT` can)."""
    if ids.shape[0] < 2 or not hasattr(base, "forward_shared_prefix"):
        return 0
    same = (ids == ids[:1]).all(0)
    common = int(same.long().cumprod(0).sum())
    scored = mask.any(0).nonzero()
    first = int(scored[0, 0]) if len(scored) else mask.shape[1]
    split = min(common, first, ids.shape[1] - 1)
    return split if split >= MIN_SHARED_PREFIX else 0
