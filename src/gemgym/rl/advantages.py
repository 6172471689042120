r"""Per-turn returns and advantage estimators over a batch of episodes (numpy only).

A batch is a list of episodes; episode ``i`` has per-turn rewards ``r[i] = (r_0, ..., r_{T-1})``.
Every estimator returns one float array per episode, aligned with its turns, so the advantage of
turn ``t`` can be broadcast to the tokens of that turn's action (:mod:`gemgym.rl.tokens`).

=============  ================================================================================
estimator      advantage of turn ``t`` of episode ``i``
=============  ================================================================================
``reinforce``  :math:`A_{i,t} = G_{i,t}`, the discounted return
               :math:`G_{i,t} = \sum_{k \ge t} \gamma^{k-t} r_{i,k}` (vanilla REINFORCE)
``rebn``       :math:`A_{i,t} = (G_{i,t} - \mathrm{mean}(G)) / (\mathrm{std}(G) + \epsilon)`, mean and
               (population) std over **every turn of every episode** of the batch: Return Batch
               Normalisation (GEM paper). Works with dense per-turn rewards and any
               :math:`\gamma \le 1`.
``rebn_group`` ReBN within each group ``g`` of episodes from the same initial state: the
               same per-turn :math:`G_{i,t}`, with the mean and std over every turn of every
               episode **of the group** (a group-wise baseline, like GRPO's, that keeps ReBN's
               per-turn credit and :math:`\gamma`). Where rewards differ little between good and
               near-good play from one state (e.g. GuessTheNumber's partial credit at the turn
               limit), the group's small std magnifies those differences, which the batch-wide
               std (dominated by differences between initial states) does not.
``grpo``       :math:`A_{i,t} = (R_i - \mathrm{mean}_{g}(R)) / (\mathrm{std}_{g}(R) + \epsilon)` with
               :math:`R_i = \sum_t r_{i,t}` the episode return and the mean/std over the episodes of
               the same group ``g`` (same initial state); every turn gets the same advantage, so
               per-turn credit and :math:`\gamma` play no part
``drgrpo``     :math:`A_{i,t} = R_i - \mathrm{mean}_{g}(R)` (Dr. GRPO: no division by the std)
``rloo``       :math:`A_{i,t} = R_i - \frac{1}{n_g - 1}\sum_{j \in g, j \ne i} R_j` (leave one out)
``gae``        PPO's generalised advantage estimate from critic values :math:`V(s_t)`:
               :math:`\delta_t = r_t + \gamma V(s_{t+1}) - V(s_t)`,
               :math:`A_t = \sum_k (\gamma\lambda)^k \delta_{t+k}`, with :math:`V(s_T) = 0` after a
               terminal step and ``bootstrap[i]`` after a truncated one
=============  ================================================================================

Groups of one episode get advantage 0 under ``grpo``, ``drgrpo`` and ``rloo`` (no baseline can be
formed). ``std`` is the population standard deviation (``ddof=0``), so ReBN's output has mean 0
and standard deviation 1 over the batch whenever the returns are not all equal (then it is 0).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from gemgym.errors import ConfigError

__all__ = [
    "ESTIMATORS",
    "GROUP_ESTIMATORS",
    "Estimator",
    "compute_advantages",
    "discounted_returns",
    "drgrpo_advantages",
    "gae_advantages",
    "grpo_advantages",
    "rebn_advantages",
    "rebn_group_advantages",
    "reinforce_advantages",
    "rloo_advantages",
]

Estimator = Literal["reinforce", "rebn", "rebn_group", "grpo", "drgrpo", "rloo", "gae"]
ESTIMATORS: tuple[str, ...] = ("reinforce", "rebn", "rebn_group", "grpo", "drgrpo", "rloo", "gae")
GROUP_ESTIMATORS: tuple[str, ...] = ("rebn_group", "grpo", "drgrpo", "rloo")
"""The estimators that need ``group_ids`` (several episodes per initial state)."""

FloatArray = np.ndarray
Rewards = Sequence[Sequence[float]] | Sequence[FloatArray]


def _check_gamma(gamma: float) -> None:
    if not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be in [0, 1], got {gamma}")


def discounted_returns(rewards: Sequence[float] | FloatArray, gamma: float = 1.0) -> FloatArray:
    """Per-turn discounted returns ``G_t = r_t + gamma * G_{t+1}`` (``G_T = 0``) of one episode."""
    _check_gamma(gamma)
    r = np.asarray(rewards, dtype=np.float64)
    out = np.empty_like(r)
    acc = 0.0
    for t in range(len(r) - 1, -1, -1):
        acc = float(r[t]) + gamma * acc
        out[t] = acc
    return out


def reinforce_advantages(rewards: Rewards, gamma: float = 1.0) -> list[FloatArray]:
    """Vanilla REINFORCE: the discounted returns themselves."""
    return [discounted_returns(r, gamma) for r in rewards]


def rebn_advantages(rewards: Rewards, gamma: float = 1.0, eps: float = 1e-8) -> list[FloatArray]:
    """Return Batch Normalisation: discounted returns normalised over all turns of the batch."""
    returns = reinforce_advantages(rewards, gamma)
    flat = np.concatenate(returns) if returns else np.zeros(0)
    if flat.size == 0:
        return returns
    mean, std = float(flat.mean()), float(flat.std())
    if std == 0.0:
        return [np.zeros_like(g) for g in returns]
    return [(g - mean) / (std + eps) for g in returns]


def rebn_group_advantages(
    rewards: Rewards, group_ids: Sequence[Hashable], gamma: float = 1.0, eps: float = 1e-8
) -> list[FloatArray]:
    """ReBN within each group: discounted returns normalised over all turns of the episodes that
    share a group id (each group's output has mean 0 and std 1 unless its returns are all
    equal, when it is 0)."""
    out: list[FloatArray] = [np.zeros(0)] * len(rewards)
    for members in _groups(group_ids, len(rewards)).values():
        group = [np.asarray(rewards[i], dtype=np.float64) for i in members]
        for i, a in zip(members, rebn_advantages(group, gamma, eps), strict=True):
            out[i] = a
    return out


def _groups(group_ids: Sequence[Hashable], n: int) -> dict[Hashable, list[int]]:
    if len(group_ids) != n:
        raise ConfigError(f"got {len(group_ids)} group ids for {n} episodes")
    groups: dict[Hashable, list[int]] = {}
    for i, g in enumerate(group_ids):
        groups.setdefault(g, []).append(i)
    return groups


def _group_baselined(
    rewards: Rewards, group_ids: Sequence[Hashable], mode: str, eps: float
) -> list[FloatArray]:
    totals = np.array([float(np.sum(r)) for r in rewards], dtype=np.float64)
    adv = np.zeros_like(totals)
    for members in _groups(group_ids, len(totals)).values():
        if len(members) < 2:
            continue
        idx = np.asarray(members)
        rs = totals[idx]
        if mode == "rloo":
            adv[idx] = rs - (rs.sum() - rs) / (len(rs) - 1)
        elif mode == "drgrpo":
            adv[idx] = rs - rs.mean()
        else:
            std = rs.std()
            adv[idx] = 0.0 if std == 0.0 else (rs - rs.mean()) / (std + eps)
    return [
        np.full(np.asarray(r).shape[0], adv[i], dtype=np.float64) for i, r in enumerate(rewards)
    ]


def grpo_advantages(
    rewards: Rewards, group_ids: Sequence[Hashable], eps: float = 1e-6
) -> list[FloatArray]:
    """GRPO: episode returns normalised within each group; every turn gets its episode's value."""
    return _group_baselined(rewards, group_ids, "grpo", eps)


def drgrpo_advantages(rewards: Rewards, group_ids: Sequence[Hashable]) -> list[FloatArray]:
    """Dr. GRPO: episode return minus its group's mean (no std division)."""
    return _group_baselined(rewards, group_ids, "drgrpo", 0.0)


def rloo_advantages(rewards: Rewards, group_ids: Sequence[Hashable]) -> list[FloatArray]:
    """RLOO: episode return minus the mean return of the other episodes of its group."""
    return _group_baselined(rewards, group_ids, "rloo", 0.0)


def gae_advantages(
    rewards: Rewards,
    values: Sequence[Sequence[float]] | Sequence[FloatArray],
    *,
    gamma: float = 1.0,
    lam: float = 0.95,
    bootstrap: Sequence[float] | None = None,
) -> tuple[list[FloatArray], list[FloatArray]]:
    """PPO's GAE: ``(advantages, value targets)`` per episode.

    Args:
        rewards: per-turn rewards of each episode.
        values: the critic's ``V(s_t)`` for each turn of each episode (same lengths).
        gamma: discount; lam: GAE's lambda (``lam=1`` gives ``G_t - V(s_t)``, ``lam=0`` the TD
            error).
        bootstrap: ``V`` of the state after the last turn, for episodes that were truncated or
            cut short; ``None`` (or 0) for episodes that terminated.
    """
    _check_gamma(gamma)
    if not 0.0 <= lam <= 1.0:
        raise ConfigError(f"lam must be in [0, 1], got {lam}")
    if len(values) != len(rewards):
        raise ConfigError(f"got values for {len(values)} episodes, rewards for {len(rewards)}")
    if bootstrap is not None and len(bootstrap) != len(rewards):
        raise ConfigError(f"got {len(bootstrap)} bootstrap values for {len(rewards)} episodes")
    advs: list[FloatArray] = []
    targets: list[FloatArray] = []
    for i, (r_seq, v_seq) in enumerate(zip(rewards, values, strict=True)):
        r = np.asarray(r_seq, dtype=np.float64)
        v = np.asarray(v_seq, dtype=np.float64)
        if r.shape != v.shape:
            raise ConfigError(f"episode {i}: {len(r)} rewards but {len(v)} values")
        next_v = 0.0 if bootstrap is None else float(bootstrap[i])
        a = np.empty_like(r)
        acc = 0.0
        for t in range(len(r) - 1, -1, -1):
            delta = r[t] + gamma * next_v - v[t]
            acc = delta + gamma * lam * acc
            a[t] = acc
            next_v = v[t]
        advs.append(a)
        targets.append(a + v)
    return advs, targets


def compute_advantages(
    estimator: str,
    rewards: Rewards,
    *,
    gamma: float = 1.0,
    group_ids: Sequence[Hashable] | None = None,
    values: Sequence[Sequence[float]] | Sequence[FloatArray] | None = None,
    lam: float = 0.95,
    bootstrap: Sequence[float] | None = None,
) -> list[FloatArray]:
    """Dispatch to an estimator by name (see the module docstring).

    ``rebn_group``, ``grpo``, ``drgrpo`` and ``rloo`` need ``group_ids`` (episodes of one group
    started from the same initial state); the last three ignore ``gamma``; ``gae`` needs
    ``values``.
    """
    _check_gamma(gamma)
    if estimator == "reinforce":
        return reinforce_advantages(rewards, gamma)
    if estimator == "rebn":
        return rebn_advantages(rewards, gamma)
    if estimator in GROUP_ESTIMATORS:
        if group_ids is None:
            raise ConfigError(
                f"estimator {estimator!r} needs group_ids: sample several episodes per initial "
                "state (e.g. Collector(group_size=8))"
            )
        if estimator == "rebn_group":
            return rebn_group_advantages(rewards, group_ids, gamma)
        if estimator == "grpo":
            return grpo_advantages(rewards, group_ids)
        if estimator == "drgrpo":
            return drgrpo_advantages(rewards, group_ids)
        return rloo_advantages(rewards, group_ids)
    if estimator == "gae":
        if values is None:
            raise ConfigError("estimator 'gae' needs critic values (values=...)")
        return gae_advantages(rewards, values, gamma=gamma, lam=lam, bootstrap=bootstrap)[0]
    raise ConfigError(f"unknown estimator {estimator!r}; choose one of {list(ESTIMATORS)}")
