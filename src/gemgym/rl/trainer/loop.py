"""The reference trainer: optional SFT warm start, then on-policy RL with any estimator.

One update collects ``episodes_per_update`` episodes with the current policy
(:class:`~gemgym.rl.Collector`, ``group_size`` episodes per initial state), computes per-turn
advantages (:func:`~gemgym.rl.compute_advantages`), broadcasts them to the tokens of each action
(:func:`~gemgym.rl.token_weights`, observations masked) and takes one gradient step on

.. math:: L = -\\frac{1}{N} \\sum_{\\text{action tokens } j} A_{t(j)} \\log \\pi(x_j \\mid x_{<j}).

With ``epochs * minibatches > 1`` the batch is reused PPO-style: ``epochs`` passes over it, each
split into ``minibatches`` shuffled minibatches of episodes, one AdamW step per minibatch on the
clipped surrogate (:func:`clipped_policy_loss`) against the log-probs of the policy that
collected the batch, so later steps cannot push a token's probability ratio past
``1 ± clip_eps``. The first step is exactly the policy gradient above.

With ``overlap=True`` collection and learning run at the same time, on two cores: while the
learner takes its step on batch ``k``, a background thread collects batch ``k + 1`` with a copy of
the policy as it was before that step (the copy is refreshed after every step). Each batch is
then one update old when it is learned from, as in asynchronous RL trainers, so the step is the
clipped surrogate against the log-probs of the copy that collected it (``dual_clip`` bounds
the negative-advantage side); an update costs about ``max(collect, learn)`` instead of
``collect + learn``. Runs stay reproducible: the same seed gives the same batches and weights.

With ``kl_coef = beta > 0`` the loss also holds ``beta`` times a KL penalty toward the reference
policy (the weights RL started from: the SFT warm start or ``init_checkpoint``), per action token
with the estimator of GRPO (Shao et al., 2024),
``k3 = pi_ref / pi - log(pi_ref / pi) - 1`` (always >= 0), averaged over the action tokens. Its
gradient is that of ``KL(pi_ref || pi)``: it pushes mass back onto actions the warm start
considered, which keeps a policy exploring where an entropy bonus would also spread the format
tokens the warm start already fixed. Unlike the entropy bonus, whose pull on a move vanishes with
the move's probability, the KL's expected pull on a move's logit is ``beta`` times
``pi_ref - pi``, so it does not vanish when the policy has given the move up (at a small
``beta`` it is weak, though: docs/rl.md).
``kl_schedule="linear"`` decays ``beta`` to 0 over the run (or at its ``kl_decay_until``
share), so that the policy can settle.
``kl_estimator="exact"`` computes ``KL(pi_ref || pi)`` over the whole vocabulary at every action
token instead (the reference then keeps its whole distribution there, ``(tokens, vocab)``): the
same gradient in expectation, ``pi - pi_ref`` on the logits, but at every step on every token,
where k3 pulls a move the policy has given up only on the rare steps that sample it.

``entropy_coef = c`` subtracts ``c`` times the policy's entropy over the action tokens from
the loss. With ``entropy_ref_min = h`` it counts only the action tokens where the reference
policy (the same frozen starting weights) has an entropy of at least ``h`` nats: the choices the
warm start left open (a game's moves), not the format tokens it already fixed, which a bonus on
every token pulls toward the uniform. With ``entropy_turns = k`` it counts only the tokens of
each episode's first ``k`` actions, so that the moves of the later turns can settle while the
earlier ones still explore. ``entropy_schedule="linear"`` decays ``c`` to 0 at the
``entropy_decay_until`` share of the run. ``entropy_target = (h0, h1)`` instead adapts ``c``
after every update so that the policy's entropy on the masked tokens follows a line from
``h0`` nats at the start to ``h1`` at the end: ``log c += entropy_target_lr * (target - H)``,
where ``H`` is the batch's mean ``-log pi`` of its sampled masked tokens (an estimate of that
entropy), and ``c`` stays within ``[1e-3, 1]``. Runs then explore along the same entropy path
whatever their seed, where a fixed coefficient lets some collapse faster than others.

``temperature = T`` samples the training batches from the policy's logits divided by ``T``
(``T > 1`` explores more, mostly where the policy still hesitates: tokens it is sure of, such as
the format's, barely move) and learns from them as from its own samples: the recorded
log-probs, and the ratios of the clipped surrogate, are those of the policy itself (temperature
1). ``min_p = m`` samples only among the tokens at least ``m`` times as likely as the best
one, so that a temperature above 1 spreads the samples over the choices the policy hesitates
between and not over the format tokens' unlikely alternatives. ``eval_temperature`` makes the
evaluations sample the policy's full distribution at that temperature (default: they sample as
the training batches do, ``temperature`` and ``min_p``).

Written to ``out_dir``: ``curves.csv`` (one row per update), ``curves.png``, ``checkpoint.pt``
(model, optimiser, counters, random states: ``resume=True`` continues from it) and
``final.json`` (the final evaluation on fresh seeds: sampling as the training batches are, or
at ``eval_temperature``, and greedy decoding).
"""

from __future__ import annotations

import copy
import csv
import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from gemgym.errors import ConfigError
from gemgym.experience import Episode, read_jsonl
from gemgym.rl.advantages import ESTIMATORS, GROUP_ESTIMATORS
from gemgym.rl.collector import Batch, Collector
from gemgym.rl.tokens import TokenizedEpisode, pad_batch, token_weights
from gemgym.rl.trainer.codec import TOKENIZERS
from gemgym.rl.trainer.policy import LMPolicy, build_model, model_positions

__all__ = [
    "CURVE_FIELDS",
    "KL_ESTIMATORS",
    "ReferenceDistribution",
    "TrainConfig",
    "Trainer",
    "clipped_policy_loss",
    "exact_kl_penalty",
    "kl_penalty",
    "plot_curves",
    "policy_gradient_loss",
]

CURVE_FIELDS = (
    "update",
    "time_s",
    "episodes",
    "success",
    "mean_turns",
    "mean_return",
    "loss",
    "collect_s",
    "learn_s",
    "eval_success",
    "eval_mean_turns",
    "decision_entropy",
    "entropy_coef",
)

ENTROPY_COEF_RANGE = (math.log(1e-3), 0.0)
"""The natural-log bounds of the bonus coefficient that ``entropy_target`` adapts."""

KL_ESTIMATORS = ("k3", "exact")
"""``TrainConfig.kl_estimator``: GRPO's k3 on the sampled tokens, or the exact KL over the
vocabulary at every action token (:func:`exact_kl_penalty`)."""

EVAL_SEED_BASE = 1_000_000_000
"""Evaluation episodes use seeds from here on; training seeds stay far below."""


@dataclass
class TrainConfig:
    """Everything a run depends on (saved in the checkpoint)."""

    env_id: str = "game:GuessTheNumber-v0-easy"
    env_kwargs: dict[str, Any] | None = None
    out_dir: str = "runs/train"
    estimator: str = "rebn"
    gamma: float = 0.9
    model: str | None = None
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_positions: int = 512
    tokenizer: str = "bytes"
    seed: int = 0
    episodes_per_update: int = 64
    group_size: int = 1
    lr: float = 1e-3
    warmup_updates: int = 0
    lr_schedule: str = "constant"
    max_grad_norm: float = 1.0
    epochs: int = 1
    minibatches: int = 1
    clip_eps: float = 0.2
    dual_clip: float | None = 3.0
    entropy_coef: float = 0.0
    entropy_ref_min: float | None = None
    entropy_turns: int | None = None
    entropy_schedule: str = "constant"
    entropy_decay_until: float = 1.0
    entropy_target: tuple[float, float] | None = None
    entropy_target_lr: float = 0.05
    kl_coef: float = 0.0
    kl_schedule: str = "constant"
    kl_decay_until: float = 1.0
    kl_estimator: str = "k3"
    updates: int | None = None
    time_budget_s: float | None = None
    sft_path: str | None = None
    init_checkpoint: str | None = None
    sft_steps: int = 300
    sft_batch_size: int = 64
    sft_lr: float = 1e-3
    max_new_tokens: int = 16
    obs_max_tokens: int = 128
    temperature: float = 1.0
    min_p: float = 0.0
    eval_temperature: float | None = None
    eval_every: int = 0
    eval_episodes: int = 256
    final_eval_episodes: int = 1000
    final_eval_greedy: bool = True
    checkpoint_every: int = 25
    device: str = "auto"
    threads: int | None = None
    overlap: bool = False

    def validate(self) -> None:
        """Raise :class:`ConfigError` for inconsistent settings."""
        if self.estimator not in ESTIMATORS or self.estimator == "gae":
            raise ConfigError(
                f"estimator must be one of {[e for e in ESTIMATORS if e != 'gae']} (the "
                f"reference trainer has no critic), got {self.estimator!r}"
            )
        if self.estimator in GROUP_ESTIMATORS and self.group_size < 2:
            raise ConfigError(f"estimator {self.estimator!r} needs group_size >= 2")
        if self.episodes_per_update % self.group_size:
            raise ConfigError("episodes_per_update must be a multiple of group_size")
        if not 0.0 <= self.gamma <= 1.0:
            raise ConfigError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.init_checkpoint and self.sft_path:
            raise ConfigError("give init_checkpoint (weights to start from) or sft_path, not both")
        if self.tokenizer not in TOKENIZERS:
            raise ConfigError(
                f"tokenizer must be one of {list(TOKENIZERS)}, got {self.tokenizer!r}"
            )
        if self.model is not None and self.tokenizer != "bytes":
            raise ConfigError(
                f"tokenizer={self.tokenizer!r} is for the default model; a Hugging Face model "
                "uses its own tokenizer"
            )
        if self.lr_schedule not in ("constant", "cosine"):
            raise ConfigError(
                f"lr_schedule must be 'constant' or 'cosine', got {self.lr_schedule!r}"
            )
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ConfigError(f"dual_clip must be > 1 (or None), got {self.dual_clip}")
        if self.entropy_coef < 0:
            raise ConfigError(f"entropy_coef must be >= 0, got {self.entropy_coef}")
        if self.entropy_ref_min is not None and self.entropy_ref_min < 0:
            raise ConfigError(f"entropy_ref_min must be >= 0 (or None), got {self.entropy_ref_min}")
        if self.entropy_turns is not None and self.entropy_turns < 1:
            raise ConfigError(f"entropy_turns must be >= 1 (or None), got {self.entropy_turns}")
        for name in ("entropy_ref_min", "entropy_turns"):
            if getattr(self, name) is not None and not self.entropy_coef:
                raise ConfigError(
                    f"{name} restricts the entropy bonus to some tokens: give entropy_coef > 0 "
                    "(--entropy-coef) too"
                )
        if self.entropy_target is not None:
            target = self.entropy_target
            if (
                not isinstance(target, (tuple, list))
                or len(target) != 2
                or not all(isinstance(h, (int, float)) and h >= 0 for h in target)
            ):
                raise ConfigError(
                    "entropy_target must be two entropies >= 0 in nats, (start, end), got "
                    f"{target!r}"
                )
            self.entropy_target = (float(target[0]), float(target[1]))
            if not self.entropy_coef:
                raise ConfigError(
                    "entropy_target adapts the entropy bonus from its starting value: give "
                    "entropy_coef > 0 (--entropy-coef) too"
                )
            if self.entropy_ref_min is None and self.entropy_turns is None:
                raise ConfigError(
                    "entropy_target needs the tokens whose entropy it follows: give "
                    "entropy_ref_min (--entropy-ref-min) or entropy_turns (--entropy-turns)"
                )
            if self.entropy_schedule != "constant":
                raise ConfigError(
                    "entropy_target sets the bonus itself: leave entropy_schedule 'constant'"
                )
        if self.entropy_target_lr <= 0:
            raise ConfigError(f"entropy_target_lr must be > 0, got {self.entropy_target_lr}")
        if not 0.0 < self.entropy_decay_until <= 1.0:
            raise ConfigError(
                f"entropy_decay_until must be in (0, 1], got {self.entropy_decay_until}"
            )
        if self.entropy_schedule not in ("constant", "linear"):
            raise ConfigError(
                f"entropy_schedule must be 'constant' or 'linear', got {self.entropy_schedule!r}"
            )
        if self.kl_coef < 0:
            raise ConfigError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.kl_schedule not in ("constant", "linear"):
            raise ConfigError(
                f"kl_schedule must be 'constant' or 'linear', got {self.kl_schedule!r}"
            )
        if not 0.0 < self.kl_decay_until <= 1.0:
            raise ConfigError(f"kl_decay_until must be in (0, 1], got {self.kl_decay_until}")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ConfigError(
                f"kl_estimator must be one of {list(KL_ESTIMATORS)}, got {self.kl_estimator!r}"
            )
        if self.kl_estimator != "k3" and not self.kl_coef:
            raise ConfigError(
                f"kl_estimator={self.kl_estimator!r} chooses how the KL penalty is computed: give "
                "kl_coef > 0 (--kl-coef) too"
            )
        if not 0.0 <= self.min_p < 1.0:
            raise ConfigError(f"min_p must be in [0, 1), got {self.min_p}")
        for name in ("temperature", "eval_temperature"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"{name} must be > 0, got {value}")
        if self.warmup_updates < 0:
            raise ConfigError(f"warmup_updates must be >= 0, got {self.warmup_updates}")
        if self.epochs < 1 or self.minibatches < 1:
            raise ConfigError("epochs and minibatches must be >= 1")
        if self.minibatches > self.episodes_per_update:
            raise ConfigError("minibatches must not exceed episodes_per_update")
        if self.updates is None and self.time_budget_s is None:
            raise ConfigError("give a number of updates or a time budget (or both)")


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
        mask = mask | _action_positions(episodes, pad_id, max_length, device)
    if entropy_coef and entropy_mask is not None:
        mask = mask | entropy_mask
    exact = bool(kl_coef) and isinstance(ref_logp, ReferenceDistribution)
    tok_logp, ent, rows = _log_probs(
        model, ids, mask, vocab_limit, entropy=bool(entropy_coef), rows=exact
    )
    if ent is not None and entropy_mask is not None:
        ent = ent * entropy_mask
    gain = w[:, 1:] * tok_logp if ent is None else w[:, 1:] * tok_logp + entropy_coef * ent
    loss = -gain.sum() / max(1, n_action)
    if kl_coef:
        loss = loss + kl_coef * _kl_term(tok_logp, rows, _require_ref(ref_logp), mask)
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


def _kl_term(logp: Any, rows: Any, ref: Any, mask: Any, count: int | None = None) -> Any:
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


def _action_positions(
    episodes: Sequence[TokenizedEpisode], pad_id: int, max_length: int | None, device: Any
) -> Any:
    """The ``(batch, length - 1)`` bool mask of the action tokens (as targets) of the batch that
    :func:`~gemgym.rl.pad_batch` pads with the same settings."""
    masks = [e.action_mask for e in episodes]
    return _padded_targets(episodes, masks, pad_id, max_length, device)[1]


def _padded_targets(
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
    return _log_probs(model, ids, mask, vocab_limit, entropy=False)[0]


def token_log_probs_and_entropy(
    model: Any, ids: Any, mask: Any, vocab_limit: int | None = None
) -> tuple[Any, Any]:
    """:func:`token_log_probs` and the policy's entropy ``-sum_v pi(v) log pi(v)`` at the same
    masked positions (both ``(batch, length - 1)``, 0 off the mask)."""
    logp, ent, _ = _log_probs(model, ids, mask, vocab_limit, entropy=True)
    return logp, ent


def _log_probs(
    model: Any, ids: Any, mask: Any, vocab_limit: int | None, *, entropy: bool, rows: bool = False
) -> tuple[Any, Any, Any]:
    """The sampled tokens' log-probs and (``entropy``) the entropy at the ``mask``ed positions,
    both ``(batch, length - 1)`` and 0 off the mask; with ``rows``, also the full log-softmax
    rows at the masked positions, ``(mask.sum(), vocab)`` in the mask's row-major order (else
    ``None``)."""
    import torch

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
    split = _shared_prefix(base, ids, mask)
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


def _shared_prefix(base: Any, ids: Any, mask: Any) -> int:
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
    logp, ent, rows = _log_probs(
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
        loss = loss + kl_coef * _kl_term(logp, rows, _require_ref(ref_logp), mask, kl_count)
    return loss


LEARN_CHUNK_EPISODES = 16


def length_chunks(lengths: np.ndarray, idx: np.ndarray) -> list[np.ndarray]:
    """``idx`` (episode indices) sorted by length and cut into chunks of about
    :data:`LEARN_CHUNK_EPISODES` (at most 4 chunks): each chunk is padded to its own longest
    episode, not the batch's, which saves the padding's work (attention grows with the
    square of the length). The chunks' gradients add up to the whole batch's."""
    order = idx[np.argsort(lengths[idx], kind="stable")]
    k = min(4, max(1, len(order) // LEARN_CHUNK_EPISODES))
    return [c for c in np.array_split(order, k) if len(c)]


class Trainer:
    """Runs :class:`TrainConfig`; see the module docstring."""

    def __init__(self, config: TrainConfig, *, log: Callable[[str], None] | None = None) -> None:
        import torch

        config.validate()
        self.config = config
        self.log = log or (lambda _msg: None)
        if config.threads:
            torch.set_num_threads(config.threads)
        if config.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            self.device = torch.device(config.device)
        torch.manual_seed(config.seed)
        self.model, self.codec = build_model(
            config.model,
            n_layer=config.n_layer,
            n_embd=config.n_embd,
            n_head=config.n_head,
            n_positions=config.n_positions,
            tokenizer=config.tokenizer,
        )
        self.model.to(self.device)
        self.max_length = model_positions(self.model)
        self.vocab_limit: int | None = getattr(self.codec, "action_vocab_size", None)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=0.0)
        self.policy = self._make_policy(self.model)
        self.out_dir = Path(config.out_dir)
        self.update = 0
        self.elapsed = 0.0
        # entropy_target: the log of the bonus coefficient, adapted after every update
        self.log_entropy_coef = math.log(config.entropy_coef) if config.entropy_coef > 0 else 0.0
        self.sft_done = False
        self.rows: list[dict[str, Any]] = []
        # the policy that collects: the model itself, or (overlap) a copy that a background
        # thread samples from while the learner steps
        self.rollout_policy = self.policy
        self._next_batch: Future[Any] | None = None
        self._resume_point: tuple[int, Any] = (0, None)
        self._pool: ThreadPoolExecutor | None = None
        # kl_coef: a frozen copy of the weights RL starts from (made by _reference)
        self.ref_model: Any = None
        if config.overlap:
            self.rollout_policy = self._make_policy(copy.deepcopy(self.model).eval())
        self.collector = self._collector(
            self.rollout_policy,
            config.episodes_per_update,
            seed=config.seed * 10_000_000,
            group_size=config.group_size,
        )

    def _collector(
        self, policy: LMPolicy, num_envs: int, *, seed: int, group_size: int = 1
    ) -> Collector:
        cfg = self.config
        return Collector(
            cfg.env_id,
            policy,
            num_envs=num_envs,
            group_size=group_size,
            seed=seed,
            history=True,
            env_kwargs=cfg.env_kwargs,
        )

    def _make_policy(self, model: Any) -> LMPolicy:
        cfg = self.config
        return LMPolicy(
            model,
            self.codec,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            min_p=cfg.min_p,
            obs_max_tokens=cfg.obs_max_tokens,
            seed=cfg.seed,
            device=self.device,
        )

    @property
    def num_parameters(self) -> int:
        """Parameters of the policy model."""
        return int(sum(p.numel() for p in self.model.parameters()))

    # -- steps -----------------------------------------------------------------------------
    def _step(
        self,
        tokens: Sequence[TokenizedEpisode],
        weights: Sequence[np.ndarray],
        entropy_coef: float = 0.0,
        kl_coef: float = 0.0,
        ref_logp: Any = None,
        entropy_mask: Any = None,
    ) -> float:
        import torch

        self.model.train()
        loss = policy_gradient_loss(
            self.model,
            tokens,
            weights,
            pad_id=self.codec.pad_id,
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
        if self.config.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        return float(loss.item())

    def sft(self, episodes: Sequence[Episode], steps: int) -> float:
        """Supervised warm start: maximise the likelihood of the recorded actions."""
        if not episodes:
            raise ConfigError("no episodes to fine-tune on")
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.sft_lr
        tokens = [self.policy.tokenize(e) for e in episodes]
        long = sum(len(t) > self.max_length for t in tokens) if self.max_length else 0
        if long:
            warnings.warn(
                f"{long} of {len(tokens)} SFT episodes are longer than the model's "
                f"{self.max_length} positions; only their first {self.max_length} tokens are "
                "learned. Give the model more positions (TrainConfig.n_positions, "
                "--n-positions) or keep fewer tokens of each observation (obs_max_tokens).",
                stacklevel=2,
            )
        rng = np.random.default_rng(self.config.seed)
        loss = math.nan
        bs = min(self.config.sft_batch_size, len(tokens))
        for _ in range(steps):
            idx = rng.choice(len(tokens), size=bs, replace=False)
            batch = [tokens[i] for i in idx]
            loss = self._step(batch, [t.action_mask.astype(np.float64) for t in batch])
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr
        return loss

    def rl_update(self) -> dict[str, Any]:
        """Collect one batch and take one policy-gradient step; returns the curve row.

        With ``overlap``, the batch learned from is the one collected during the previous
        update (the first is collected here), and the next one is collected meanwhile.
        """
        cfg = self.config
        t0 = time.perf_counter()
        if self._uses_reference:
            self._reference()  # made here, never by the collection thread
        if cfg.overlap:
            pending, self._next_batch = self._next_batch, None
            scored = pending.result() if pending is not None else None
            self._sync_rollout_policy()  # the collector is idle: give it the learner's weights
            if scored is None:  # the first update collects in the foreground
                scored = self._collect_scored(cfg.episodes_per_update)
            batch, tokens, behaviour, ref, ent_mask = scored
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="gemgym-collect")
            # where a resumed run starts collecting again: the pending batch is not saved
            self._resume_point = (
                self.collector._next_group,
                self.rollout_policy.generator.get_state(),
            )
            self._next_batch = self._pool.submit(self._collect_scored, cfg.episodes_per_update)
        else:
            batch = self.collector.collect(cfg.episodes_per_update)
            tokens = [self.policy.tokenize(e) for e in batch.episodes]
            behaviour = None
            ref, ent_mask = self._reference_scores(tokens)
        t1 = time.perf_counter()
        if cfg.warmup_updates or cfg.lr_schedule != "constant":
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate()
        adv = batch.advantages(cfg.estimator, gamma=cfg.gamma)
        weights = [token_weights(t, a) for t, a in zip(tokens, adv, strict=True)]
        entropy_coef, kl_coef = self.entropy_coefficient(), self.kl_coefficient()
        if cfg.epochs * cfg.minibatches == 1 and behaviour is None:
            loss = self._step(tokens, weights, entropy_coef, kl_coef, ref, ent_mask)
        else:
            loss = self._ppo_steps(
                tokens,
                weights,
                behaviour,
                ref,
                entropy_coef=entropy_coef,
                entropy_mask=ent_mask,
                kl_coef=kl_coef,
            )
        s = batch.summary()
        self.update += 1
        extra: dict[str, Any] = {}
        if ent_mask is not None and bool(ent_mask.any()):
            # -log pi of the sampled decision tokens: an estimate of the collecting policy's
            # entropy where the reference hesitated (the moves), which the bonus holds up
            if behaviour is None:  # as the policy recorded them while sampling
                behaviour = self._recorded_log_probs(batch, tokens)
            if behaviour is not None:
                extra["decision_entropy"] = round(-float(behaviour[ent_mask].mean()), 4)
        if cfg.entropy_coef:
            extra["entropy_coef"] = round(entropy_coef, 5)
        if cfg.entropy_target is not None and "decision_entropy" in extra:
            self.adapt_entropy_coef(extra["decision_entropy"])
        return {
            **extra,
            "update": self.update,
            "episodes": self.update * cfg.episodes_per_update,
            "success": s["success_rate"],
            "mean_turns": s["mean_turns"],
            "mean_return": s["mean_return"],
            "loss": loss,
            "collect_s": round(t1 - t0, 3),
            "learn_s": round(time.perf_counter() - t1, 3),
        }

    def learning_rate(self) -> float:
        """The RL learning rate of the next update: ``lr``, times a linear warm-up over the first
        ``warmup_updates`` updates, times ``(1 + cos(pi * progress)) / 2`` with the cosine
        schedule (progress: the share of the time budget used, or of ``updates`` when there is
        no time budget)."""
        cfg = self.config
        factor = 1.0
        if cfg.warmup_updates:
            factor = min(1.0, (self.update + 1) / cfg.warmup_updates)
        if cfg.lr_schedule == "cosine":
            factor *= 0.5 * (1.0 + math.cos(math.pi * self._progress()))
        return cfg.lr * factor

    def _progress(self) -> float:
        """The share of the run done: of the time budget, or of ``updates`` without one."""
        cfg = self.config
        if cfg.time_budget_s is not None:
            return min(1.0, self.elapsed / cfg.time_budget_s)
        return min(1.0, self.update / max(1, cfg.updates or 1))

    def entropy_coefficient(self) -> float:
        """The entropy bonus of the next update: ``entropy_coef``, times
        ``1 - progress / entropy_decay_until`` (at least 0) with ``entropy_schedule="linear"``
        (progress as in :meth:`learning_rate`): 0 from that share of the run on. With
        ``entropy_target``, the coefficient :meth:`adapt_entropy_coef` has reached."""
        cfg = self.config
        if cfg.entropy_target is not None:
            return math.exp(self.log_entropy_coef)
        return self._scheduled(cfg.entropy_coef, cfg.entropy_schedule, cfg.entropy_decay_until)

    def entropy_target_now(self) -> float:
        """The entropy (nats) ``entropy_target`` asks for now: its start, moved linearly
        toward its end with the run's progress (as in :meth:`learning_rate`)."""
        start, end = self.config.entropy_target or (0.0, 0.0)
        return start + (end - start) * self._progress()

    def adapt_entropy_coef(self, entropy: float) -> float:
        """Move the bonus coefficient toward holding the moves' entropy on the target line:
        up when ``entropy`` (the batch's estimate, nats) is under :meth:`entropy_target_now`,
        down when over, by ``exp(entropy_target_lr * (target - entropy))``, kept within
        ``[1e-3, 1]``; returns the new coefficient."""
        step = self.config.entropy_target_lr * (self.entropy_target_now() - entropy)
        self.log_entropy_coef = min(
            ENTROPY_COEF_RANGE[1], max(ENTROPY_COEF_RANGE[0], self.log_entropy_coef + step)
        )
        return math.exp(self.log_entropy_coef)

    def kl_coefficient(self) -> float:
        """The KL coefficient of the next update: ``kl_coef``, times
        ``1 - progress / kl_decay_until`` (at least 0) with ``kl_schedule="linear"`` (progress
        as in :meth:`learning_rate`)."""
        cfg = self.config
        return self._scheduled(cfg.kl_coef, cfg.kl_schedule, cfg.kl_decay_until)

    def _scheduled(self, coef: float, schedule: str, until: float) -> float:
        """``coef``, or with the ``"linear"`` schedule ``coef * max(0, 1 - progress / until)``."""
        if schedule == "linear":
            return coef * max(0.0, 1.0 - self._progress() / until)
        return coef

    @property
    def _uses_reference(self) -> bool:
        """Whether a frozen reference scores the batches (``kl_coef`` or ``entropy_ref_min``)."""
        return bool(self.config.kl_coef) or self.config.entropy_ref_min is not None

    def _collect_scored(self, episodes: int) -> tuple[Batch, list[TokenizedEpisode], Any, Any, Any]:
        """Collect with the rollout policy and score the batch's tokens with it: the batch, its
        tokens, the collecting policy's log-probs of the action tokens (``overlap``), and what
        :meth:`_reference_scores` gives."""
        batch = self.collector.collect(episodes)
        tokens = [self.rollout_policy.tokenize(e) for e in batch.episodes]
        logp = self._recorded_log_probs(batch, tokens)
        if logp is None:
            logp = self._score(self.rollout_policy.model, tokens)
        ref, ent_mask = self._reference_scores(tokens)
        return batch, tokens, logp, ref, ent_mask

    def _reference_scores(self, tokens: Sequence[TokenizedEpisode]) -> tuple[Any, Any]:
        """The reference policy's log-probs of the action tokens (``kl_coef``; else ``None``)
        and the bool mask of the action tokens the entropy bonus applies to (else ``None``):
        those where the reference's entropy is at least ``entropy_ref_min`` nats, and those of
        the first ``entropy_turns`` actions of each episode.

        With ``kl_estimator="exact"`` the reference's part is a :class:`ReferenceDistribution`
        (its whole distribution at the action tokens) instead of log-probs.

        The reference does not score once a coefficient that needs it has been decayed to 0
        (its schedule never raises it again): the log-probs are ``None`` when the KL
        coefficient is 0, and so is the reference's part of the mask when the entropy
        coefficient is."""
        import torch

        cfg = self.config
        ref_logp = ent_mask = None
        kl_on = self.kl_coefficient() > 0
        entropy_on = cfg.entropy_ref_min is not None and self.entropy_coefficient() > 0
        if kl_on and cfg.kl_estimator == "exact":
            ids, mask = self._action_batch(tokens)
            with torch.no_grad():
                _, ent, rows = _log_probs(
                    self._reference(), ids, mask, self.vocab_limit, entropy=entropy_on, rows=True
                )
            ref_logp = ReferenceDistribution.from_mask(rows, mask)
            if entropy_on:
                ent_mask = mask & (ent >= cfg.entropy_ref_min)
        elif entropy_on:
            logp, ent, mask = self._score_with_entropy(self._reference(), tokens)
            ent_mask = mask & (ent >= cfg.entropy_ref_min)
            ref_logp = logp if kl_on else None
        elif kl_on:
            ref_logp = self._score(self._reference(), tokens)
        if cfg.entropy_turns is not None:
            turns = self._turn_mask(tokens, cfg.entropy_turns)
            ent_mask = turns if ent_mask is None else ent_mask & turns
        return ref_logp, ent_mask

    def _turn_mask(self, tokens: Sequence[TokenizedEpisode], k: int) -> Any:
        """The bool mask (as targets: ``(batch, length - 1)``) of the tokens of each episode's
        first ``k`` actions."""
        return self._padded(tokens, [(t.turn_index >= 0) & (t.turn_index < k) for t in tokens])[1]

    def _recorded_log_probs(self, batch: Batch, tokens: Sequence[TokenizedEpisode]) -> Any:
        """The rollout policy's log-probs of the batch's action tokens as it recorded them while
        sampling, laid out as :meth:`_score` computes them (``None`` if some are missing): the
        same values up to float rounding, without a second forward pass over the batch."""
        import torch

        recorded = [self.rollout_policy.sampled_log_probs(e) for e in batch.episodes]
        length = max((len(t) for t in tokens), default=0)
        if self.max_length is not None:
            length = min(length, self.max_length)
        out = np.zeros((len(tokens), max(length - 1, 0)), dtype=np.float32)
        for i, (tok, rec) in enumerate(zip(tokens, recorded, strict=True)):
            pos = np.flatnonzero(tok.action_mask)
            if rec is None or len(rec) != len(pos):
                return None
            keep = (pos >= 1) & (pos < length)
            out[i, pos[keep] - 1] = np.asarray(rec, dtype=np.float32)[keep]
        return torch.from_numpy(out).to(self.device)

    def _action_batch(self, tokens: Sequence[TokenizedEpisode]) -> tuple[Any, Any]:
        """The padded id tensor of ``tokens`` and the bool mask of its action tokens (as
        targets: ``(batch, length - 1)``)."""
        return self._padded(tokens, [t.action_mask for t in tokens])

    def _padded(
        self, tokens: Sequence[TokenizedEpisode], masks: Sequence[np.ndarray]
    ) -> tuple[Any, Any]:
        """:func:`_padded_targets` with this trainer's padding, length and device."""
        return _padded_targets(tokens, masks, self.codec.pad_id, self.max_length, self.device)

    def _score(self, model: Any, tokens: Sequence[TokenizedEpisode]) -> Any:
        """``model``'s log-probs of the action tokens of the padded batch (0 elsewhere)."""
        import torch

        ids, mask = self._action_batch(tokens)
        with torch.no_grad():
            return token_log_probs(model, ids, mask, self.vocab_limit)

    def _score_with_entropy(
        self, model: Any, tokens: Sequence[TokenizedEpisode]
    ) -> tuple[Any, Any, Any]:
        """As :meth:`_score`, with ``model``'s entropy at the same tokens and the action mask."""
        import torch

        ids, mask = self._action_batch(tokens)
        with torch.no_grad():
            logp, ent = token_log_probs_and_entropy(model, ids, mask, self.vocab_limit)
        return logp, ent, mask

    def _reference(self) -> Any:
        """The reference model of ``kl_coef`` and ``entropy_ref_min`` (a frozen copy of the
        weights RL started from)."""
        if self.ref_model is None:
            self.ref_model = copy.deepcopy(self.model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        return self.ref_model

    def _sync_rollout_policy(self) -> None:
        """Copy the learner's weights into the rollout policy's model (``overlap`` only)."""
        import torch

        if self.rollout_policy is not self.policy:
            with torch.no_grad():
                for dst, src in zip(
                    self.rollout_policy.model.parameters(), self.model.parameters(), strict=True
                ):
                    dst.copy_(src)

    def _drain(self) -> None:
        """Wait for a background collection to end and forget its batch (``overlap`` only)."""
        pending, self._next_batch = self._next_batch, None
        if pending is not None:
            pending.result()
            # rewind: the next collection replays these seeds and samples
            group, sample_rng = self._resume_point
            self.collector._next_group = group
            self.rollout_policy.generator.set_state(sample_rng)

    def _stop_collection(self) -> None:
        """Drain the background collection and end its thread (``overlap`` only)."""
        self._drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def close(self) -> None:
        """Stop the background collection thread (``overlap``) and close the envs."""
        self._stop_collection()
        self.collector.close()

    def _ppo_steps(
        self,
        tokens: Sequence[TokenizedEpisode],
        weights: Sequence[np.ndarray],
        behaviour: Any = None,
        ref: Any = None,
        entropy_coef: float | None = None,
        entropy_mask: Any = None,
        kl_coef: float | None = None,
    ) -> float:
        """``epochs`` passes of ``minibatches`` clipped-surrogate steps over one batch, against
        ``behaviour`` (the collecting policy's log-probs) or the current policy's; ``ref``: the
        reference policy's log-probs (for ``kl_coef``, default the config's); ``entropy_coef``
        (default the config's) and ``entropy_mask``: the entropy bonus and its tokens."""
        import torch

        cfg = self.config
        ids_np, _, w_np = pad_batch(
            tokens, weights, pad_id=self.codec.pad_id, max_length=self.max_length
        )
        lengths = np.minimum([len(t) for t in tokens], ids_np.shape[1])
        ids = torch.from_numpy(ids_np).to(self.device)
        w = torch.from_numpy(w_np).to(device=self.device, dtype=torch.float32)
        if behaviour is not None:
            old = behaviour
        else:
            self.model.eval()
            with torch.no_grad():
                old = token_log_probs(self.model, ids, w[:, 1:] != 0, self.vocab_limit)
        ent_coef = cfg.entropy_coef if entropy_coef is None else entropy_coef
        ent_mask = entropy_mask if ent_coef else None
        kl = cfg.kl_coef if kl_coef is None else kl_coef
        acts = None
        if kl:
            acts = _action_positions(tokens, self.codec.pad_id, self.max_length, self.device)
        self.model.train()
        rng = np.random.default_rng([cfg.seed, self.update])
        losses = []
        for _ in range(cfg.epochs):
            for idx in np.array_split(rng.permutation(len(tokens)), cfg.minibatches):
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
                        clip_eps=cfg.clip_eps,
                        dual_clip=cfg.dual_clip,
                        vocab_limit=self.vocab_limit,
                        entropy_coef=ent_coef,
                        kl_coef=kl,
                        ref_logp=None if ref is None else ref[sel, : n - 1],
                        action_mask=None if acts is None else acts[sel, : n - 1],
                        counts=counts,
                        entropy_mask=None if ent_mask is None else ent_mask[sel, : n - 1],
                    )
                    loss.backward()
                    total += float(loss.item())
                if cfg.max_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                losses.append(total)
        return float(np.mean(losses))

    def evaluate(
        self, episodes: int, *, seed: int = EVAL_SEED_BASE, greedy: bool = False
    ) -> dict[str, float]:
        """Play ``episodes`` fresh episodes (seeds never used in training) with the policy,
        sampling at ``eval_temperature`` (default: as the training batches are sampled), or
        taking the most likely token (``greedy=True``)."""
        cfg = self.config
        batch_size = min(episodes, max(64, cfg.episodes_per_update))
        out: list[Episode] = []
        was = self.policy.greedy, self.policy.temperature, self.policy.min_p
        self.policy.greedy = greedy
        if cfg.eval_temperature is not None:  # the policy's own distribution, tempered
            self.policy.temperature, self.policy.min_p = cfg.eval_temperature, 0.0
        try:
            with self._collector(self.policy, batch_size, seed=seed) as col:
                while len(out) < episodes:
                    out.extend(col.collect(min(batch_size, episodes - len(out))).episodes)
        finally:
            self.policy.greedy, self.policy.temperature, self.policy.min_p = was
        from gemgym.experience import summarize

        return summarize(out)

    # -- the run ---------------------------------------------------------------------------
    def run(self, *, resume: bool = False) -> dict[str, Any]:
        """SFT (once), RL until the update count or the time budget, final evaluation."""
        cfg = self.config
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if resume and (self.out_dir / "checkpoint.pt").exists():
            self.load(self.out_dir / "checkpoint.pt")
            self.log(f"resumed at update {self.update} ({self.elapsed:.0f} s)")
        start = time.perf_counter() - self.elapsed
        if cfg.init_checkpoint and self.update == 0 and not self.sft_done:
            self.load_weights(cfg.init_checkpoint)
            self.sft_done = True
            self.log(f"weights from {cfg.init_checkpoint}")
        if cfg.sft_path and not self.sft_done:
            eps = list(read_jsonl(cfg.sft_path))
            loss = self.sft(eps, cfg.sft_steps)
            self.sft_done = True
            self.elapsed = time.perf_counter() - start
            self.log(f"SFT on {len(eps)} episodes, {cfg.sft_steps} steps: loss {loss:.3f}")
        while True:
            self.elapsed = time.perf_counter() - start
            if cfg.updates is not None and self.update >= cfg.updates:
                break
            if cfg.time_budget_s is not None and self.elapsed >= cfg.time_budget_s:
                break
            row = self.rl_update()
            if cfg.eval_every and self.update % cfg.eval_every == 0:
                ev = self.evaluate(cfg.eval_episodes, seed=EVAL_SEED_BASE + 10_000_000)
                row["eval_success"] = ev["success_rate"]
                row["eval_mean_turns"] = ev["mean_turns"]
            row["time_s"] = round(time.perf_counter() - start, 2)
            self.rows.append(row)
            evaluated = (
                f"  eval {row['eval_success']:.3f} / {row['eval_mean_turns']:.2f} turns"
                if "eval_success" in row
                else ""
            )
            self.log(
                f"update {row['update']:4d}  {row['time_s']:7.1f}s  success {row['success']:.2f}"
                f"  turns {row['mean_turns']:.2f}  loss {row['loss']:+.4f}{evaluated}"
            )
            if cfg.checkpoint_every and self.update % cfg.checkpoint_every == 0:
                self.elapsed = time.perf_counter() - start
                self.save(self.out_dir / "checkpoint.pt")
        self._stop_collection()  # overlap: the batch collected meanwhile is not used
        self.elapsed = time.perf_counter() - start
        self.save(self.out_dir / "checkpoint.pt")
        self.write_curves()
        final: dict[str, Any] = {
            "config": asdict(cfg),
            "parameters": self.num_parameters,
            "updates": self.update,
            "train_time_s": round(self.elapsed, 1),
        }
        if cfg.final_eval_episodes:
            final["eval"] = self.evaluate(cfg.final_eval_episodes)
            self.log(f"final eval: {final['eval']}")
            if cfg.final_eval_greedy:
                final["eval_greedy"] = self.evaluate(cfg.final_eval_episodes, greedy=True)
                self.log(f"final eval, greedy decoding: {final['eval_greedy']}")
        (self.out_dir / "final.json").write_text(json.dumps(final, indent=2) + "\n")
        return final

    # -- persistence -----------------------------------------------------------------------
    def write_curves(self) -> None:
        """Write ``curves.csv`` and ``curves.png`` in ``out_dir``."""
        path = self.out_dir / "curves.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=CURVE_FIELDS, extrasaction="ignore")
            w.writeheader()
            for row in self.rows:
                w.writerow({k: row.get(k, "") for k in CURVE_FIELDS})
        plot_curves({self.config.estimator: path}, self.out_dir / "curves.png")

    def save(self, path: Path) -> None:
        """Save model, optimiser, counters, curves and random states."""
        import torch

        if self._next_batch is not None:  # overlap: as before the pending collection
            group, sample_rng = self._resume_point
        else:
            group, sample_rng = (
                self.collector._next_group,
                self.rollout_policy.generator.get_state(),
            )
        torch.save(
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "config": asdict(self.config),
                "update": self.update,
                "elapsed": self.elapsed,
                "log_entropy_coef": self.log_entropy_coef,
                "sft_done": self.sft_done,
                "rows": self.rows,
                "collector_group": group,
                "torch_rng": torch.get_rng_state(),
                "sample_rng": sample_rng,
                "ref_model": None if self.ref_model is None else self.ref_model.state_dict(),
            },
            path,
        )

    def load_weights(self, path: Path | str) -> None:
        """Load only the model weights of a checkpoint (e.g. a shared SFT warm start)."""
        import torch

        state = torch.load(path, map_location=self.device, weights_only=False)
        self.model.load_state_dict(state["model"])

    def load(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save` (same model settings)."""
        import torch

        state = torch.load(path, map_location=self.device, weights_only=False)
        saved = state["config"]
        for key in (
            "env_id",
            "env_kwargs",
            "model",
            "n_layer",
            "n_embd",
            "n_head",
            "n_positions",
            "tokenizer",
        ):
            # a key missing from an older checkpoint had the default of its time
            if saved.get(key, getattr(TrainConfig, key)) != getattr(self.config, key):
                raise ConfigError(
                    f"checkpoint {path} was made with {key}={saved.get(key)!r}, not "
                    f"{getattr(self.config, key)!r}; use another out_dir or the same settings"
                )
        self.model.load_state_dict(state["model"])
        if state.get("ref_model") is not None:
            self.ref_model = None
            self._reference().load_state_dict(state["ref_model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.update = int(state["update"])
        self.elapsed = float(state["elapsed"])
        self.log_entropy_coef = float(state.get("log_entropy_coef", self.log_entropy_coef))
        self.sft_done = bool(state["sft_done"])
        self.rows = list(state["rows"])
        self.collector._next_group = int(state["collector_group"])
        torch.set_rng_state(state["torch_rng"].cpu())  # map_location moved it
        gen = self.rollout_policy.generator
        gen.set_state(state["sample_rng"].cpu())  # a CUDA generator too takes a CPU state


def config_from_dict(d: dict[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from a dict (unknown keys are an error)."""
    names = {f.name for f in fields(TrainConfig)}
    unknown = set(d) - names
    if unknown:
        raise ConfigError(f"unknown training settings {sorted(unknown)}; valid: {sorted(names)}")
    return TrainConfig(**d)


def plot_curves(
    runs: dict[str, Path | str], out_png: Path | str, *, x: str = "time_s", window: int = 10
) -> None:
    """Plot success rate and mean turns of one or more ``curves.csv`` files (moving average)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    plotted = False
    for label, path in runs.items():
        with open(path, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            continue
        xs = np.array([float(r[x]) for r in rows])
        if x == "time_s":
            xs = xs / 60.0
        for ax, key in zip(axes, ("success", "mean_turns"), strict=True):
            ys = np.array([float(r[key]) for r in rows])
            k = max(1, min(window, len(ys)))
            smooth = np.convolve(ys, np.ones(k) / k, mode="valid")
            ax.plot(xs[k - 1 :], smooth, label=label)
            plotted = True
    for ax, title in zip(axes, ("success rate (training batches)", "mean turns"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("minutes" if x == "time_s" else x)
        ax.grid(alpha=0.3)
    if plotted:
        axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
