"""Running an audit: every exploit against the random agent and the expert, per env.

:func:`audit` resolves the env specs, reads each env's traits (:func:`gemgym.audit.targets.probe`),
then plays, with gemgym's one episode engine (:class:`gemgym.episodes.Engine`), the same episode
specs (seeds ``seed + k``; dataset items ``(seed + k) mod size``) with the random agent
(``env.sample_random_action``), the expert (``env.expert_action``, when the env has one) and each
exploit that applies. The expert also plays *donor* episodes on other items / seeds, whose
actions the copying exploits replay. The state probe plays its episodes one after another on a
single env copy (each run sees the previous one's traces); the others ``concurrency`` at once.
Each exploit's returns are tested against the random agent's (:mod:`gemgym.audit.stats`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from gemgym.audit.expected import expected_reason
from gemgym.audit.policies import Context, Donors, Exploit, get_exploits
from gemgym.audit.report import ArmResult, AuditReport, EnvAudit
from gemgym.audit.stats import mean, permutation_p
from gemgym.audit.targets import Traits, probe, resolve
from gemgym.episodes import ActRequest, Engine, EnvSource, Episode, EpisodeSpec, run_sync
from gemgym.errors import ConfigError

__all__ = ["DONOR_OFFSET", "Progress", "audit"]

Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)``: episodes played so far, in all, and what is playing."""

DONOR_OFFSET = 100_000
"""Donor episodes of seeded envs use seeds ``seed + DONOR_OFFSET + k`` (never an audited one)."""


class _EnvPolicy:
    """A baseline that asks the env: ``sample_random_action`` or ``expert_action``."""

    def __init__(self, capability: str) -> None:
        self.capability = capability

    def act_batch(self, requests: Sequence[ActRequest]) -> list[Any]:
        return [r.env.call(self.capability) for r in requests]


def _specs(traits: Traits, episodes: int, seed: int, *, donors: bool = False) -> list[EpisodeSpec]:
    out = []
    for k in range(episodes):
        if traits.size is not None:
            shift = episodes if donors else 0
            index = (seed + shift + k) % traits.size
            out.append(EpisodeSpec(k, seed=seed + k, options={"index": index}))
        else:
            out.append(EpisodeSpec(k, seed=seed + (DONOR_OFFSET if donors else 0) + k))
    return out


def _arm(
    name: str,
    eps: list[Episode],
    random: ArmResult | None,
    *,
    alpha: float,
    margin: float,
    seed: int,
    env: str,
) -> ArmResult:
    returns = [e.total_return for e in eps]
    failed = [e for e in eps if e.failed]
    arm = ArmResult(
        name,
        episodes=len(eps),
        errors=len(failed),
        mean_return=mean(returns),
        success_rate=mean([1.0 if e.success else 0.0 for e in eps]),
        returns=returns,
        first_error=f"{failed[0].error_stage}: {failed[0].error}" if failed else None,
    )
    if random is not None:
        arm.delta = arm.mean_return - random.mean_return
        arm.p_value = permutation_p(returns, random.returns, seed=seed)
        arm.beats_random = arm.delta > margin and arm.p_value < alpha
        if arm.beats_random:
            arm.expected = expected_reason(env, name)
    return arm


class _Auditor:
    def __init__(
        self,
        *,
        episodes: int,
        seed: int,
        max_turns: int | None,
        concurrency: int,
        search_url: str | None,
        progress: Progress | None,
        total: int,
    ) -> None:
        self.episodes = episodes
        self.seed = seed
        self.max_turns = max_turns
        self.concurrency = concurrency
        self.search_url = search_url
        self.progress = progress
        self.total = total
        self.done = 0
        self.last_wall_s = 0.0

    def play(
        self, target: Any, policy: Any, specs: list[EpisodeSpec], label: str, *, concurrency: int
    ) -> list[Episode]:
        search_url = self.search_url
        source = EnvSource.make(lambda: target.make(search_url=search_url), env_id=target.name)
        engine = Engine(
            policy,
            source,
            concurrency=max(1, min(concurrency, len(specs))),
            max_turns=self.max_turns,
            seed=self.seed,
        )
        eps: list[Episode] = []
        t0 = time.perf_counter()
        try:
            for ep in run_sync(lambda: engine.play(specs)):
                eps.append(ep)
                self.done += 1
                if self.progress is not None:
                    self.progress(self.done, self.total, label)
        finally:
            engine.close()
        self.last_wall_s = time.perf_counter() - t0
        return sorted(eps, key=lambda e: e.index)


def _units(traits: Traits, exploits: Sequence[Exploit], episodes: int) -> int:
    runs = 1 + (2 if traits.has_expert else 0)
    runs += sum(e.applies(traits) is None for e in exploits)
    return runs * episodes


def audit(
    env_ids: Sequence[str],
    *,
    episodes: int = 8,
    seed: int = 0,
    policies: Sequence[str] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_turns: int | None = 30,
    concurrency: int = 4,
    alpha: float = 0.01,
    margin: float = 0.01,
    search_url: str | None = None,
    progress: Progress | None = None,
) -> AuditReport:
    """Audit envs: every exploit policy that applies, against the random agent and the expert.

    Args:
        env_ids: env ids, globs (``game:*-easy``), suites (``games``) or ``id+python``.
        episodes: episodes per policy per env (at least 2; 5+ to be able to flag at
            ``alpha=0.01``, see :func:`gemgym.audit.stats.min_episodes`).
        seed: episode ``k`` is reset with ``seed + k``; dataset envs serve item
            ``(seed + k) mod size``.
        policies: exploit names to run (default: all of
            :data:`gemgym.audit.policies.EXPLOITS`).
        env_kwargs: keyword arguments for every env.
        max_turns: the engine's turn cap per episode (``None``: the env's own limit).
        concurrency: episodes in flight per policy.
        alpha, margin: the flag rule (:mod:`gemgym.audit.stats`).
        search_url: the search server for ``+search`` envs.
        progress: called after each episode (``done, total, label``).

    Returns:
        The :class:`~gemgym.audit.report.AuditReport`; its ``exit_status`` is 1 when an exploit
        beats random unexplained.

    Raises:
        ConfigError: bad arguments, an unknown id (with close matches) or policy name.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 2:
        raise ConfigError(f"episodes must be an int of at least 2, got {episodes!r}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha!r}")
    if margin < 0:
        raise ConfigError(f"margin must be at least 0, got {margin!r}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency!r}")
    exploits = get_exploits(policies)
    targets = resolve(list(env_ids), env_kwargs)
    traits = [probe(t, seed=seed, search_url=search_url) for t in targets]
    total = sum(_units(tr, exploits, episodes) for tr in traits)
    auditor = _Auditor(
        episodes=episodes,
        seed=seed,
        max_turns=max_turns,
        concurrency=concurrency,
        search_url=search_url,
        progress=progress,
        total=total,
    )
    results = [
        _audit_env(auditor, target, tr, exploits, alpha=alpha, margin=margin)
        for target, tr in zip(targets, traits, strict=True)
    ]
    config = {
        "episodes": episodes,
        "seed": seed,
        "max_turns": max_turns,
        "alpha": alpha,
        "margin": margin,
        "policies": [e.name for e in exploits],
        "env_kwargs": dict(env_kwargs or {}),
    }
    return AuditReport(results, config)


def _audit_env(
    auditor: _Auditor,
    target: Any,
    traits: Traits,
    exploits: Sequence[Exploit],
    *,
    alpha: float,
    margin: float,
) -> EnvAudit:
    n, seed, name = auditor.episodes, auditor.seed, traits.name
    specs = _specs(traits, n, seed)
    par = auditor.concurrency

    def arm(label: str, eps: list[Episode], random: ArmResult | None) -> ArmResult:
        result = _arm(label, eps, random, alpha=alpha, margin=margin, seed=seed, env=name)
        result.wall_s = round(auditor.last_wall_s, 3)
        return result

    random_eps = auditor.play(
        target, _EnvPolicy("sample_random_action"), specs, f"{name}: random", concurrency=par
    )
    random = arm("random", random_eps, None)
    expert: ArmResult | None = None
    donors = Donors()
    if traits.has_expert:
        expert_policy = _EnvPolicy("expert_action")
        expert_eps = auditor.play(target, expert_policy, specs, f"{name}: expert", concurrency=par)
        expert = arm("expert", expert_eps, None)
        donor_specs = _specs(traits, n, seed, donors=True)
        for ep in auditor.play(
            target, expert_policy, donor_specs, f"{name}: expert (donors)", concurrency=par
        ):
            if not ep.failed:
                donors.episodes.append([t.action for t in ep.turns])
                index = ep.reset_info.get("index") if traits.dataset else None
                donors.items.append(index if isinstance(index, int) else None)
    notes: Counter[str] = Counter()
    results: list[ArmResult] = []
    for exploit in exploits:
        reason = exploit.applies(traits)
        if reason is None and exploit.needs_donors and not donors.episodes:
            reason = "no donor episodes (the expert failed on every other item)"
        if reason is not None:
            results.append(ArmResult(exploit.name, applies=False, reason=reason))
            continue
        ctx = Context(traits, donors, notes)
        eps = auditor.play(
            target,
            exploit.policy(ctx),
            specs,
            f"{name}: {exploit.name}",
            concurrency=1 if exploit.sequential else par,
        )
        results.append(arm(exploit.name, eps, random))
    return EnvAudit(name, traits.family, traits.kind, random, expert, results, dict(notes))
