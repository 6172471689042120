"""Experience collection on top of the vector envs: a batched policy in, episodes out.

:class:`Collector` steps a :class:`~gemgym.vector.VectorEnv` (any backend, autoreset disabled)
with a batched policy ``policy(list_of_observations) -> list_of_actions`` and returns finished
:class:`~gemgym.experience.Episode` records grouped in a :class:`Batch`. The episodes are played
by the episode engine (:class:`gemgym.episodes.Engine`), as under every other front end: the
policy is called once per turn with the turns of every episode in flight, in slot order.

Group sampling (for GRPO, Dr. GRPO, RLOO): with ``group_size=n`` every initial state is played
``n`` times; the members of a group are reset with the same seed, so they start from the same
state, and share a group id. Consecutive :meth:`Collector.collect` calls use fresh seeds.
:meth:`Collector.state_dict` and :meth:`Collector.load_state_dict` save and restore where the
seeds stand (a resumed run continues with the next unused seeds; a collection that is thrown
away can be replayed by restoring the state from before it).

A policy that needs the whole conversation (an LLM that sees the history) sets
``history=True``: it then receives the episodes in progress (their ``initial_observation`` and
``transitions`` so far) instead of the latest observations. A policy may also be an engine
policy (:mod:`gemgym.episodes.policy`: async ``act(request)`` or ``act_batch(requests)``), which
gets the whole :class:`~gemgym.episodes.ActRequest`.

Episodes that fail (their env raises, the policy fails on them: ``finish_reason == "error"``)
are left out of the batch unless ``keep_errors=True``; :attr:`Batch.errors` counts them and
:attr:`Batch.failed` holds them. The rest of a failed episode's group stays in the batch with
its group id, so group estimators baseline it on the episodes left (a group left with one
episode gets no advantage from GRPO, Dr. GRPO or RLOO).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gemgym.episodes.engine import Engine, EnvSource, EpisodeSpec, run_sync
from gemgym.episodes.outcomes import episode_seed
from gemgym.episodes.policy import FunctionPolicy
from gemgym.errors import ConfigError
from gemgym.experience import Episode, summarize
from gemgym.rl.advantages import compute_advantages
from gemgym.vector import VectorEnv
from gemgym.vector.base import WrapperFactory

__all__ = ["Batch", "BatchPolicy", "Collector"]

BatchPolicy = Callable[[list[Any]], Sequence[Any]]
"""``policy(observations) -> actions`` (or episodes in progress, with ``history=True``)."""


@dataclass
class Batch:
    """Episodes of one collection, with their group ids (episodes of a group share a seed)."""

    episodes: list[Episode]
    group_ids: list[int] = field(default_factory=list)
    errors: int = 0
    """Failed episodes left out of :attr:`episodes`."""
    failed: list[Episode] = field(default_factory=list)
    """The failed episodes left out (their ``error_stage`` and ``error`` say what broke)."""

    @property
    def rewards(self) -> list[list[float]]:
        """Per-turn rewards of every episode."""
        return [e.rewards for e in self.episodes]

    def advantages(
        self, estimator: str, *, gamma: float = 1.0, values: Any = None, lam: float = 0.95
    ) -> list[np.ndarray]:
        """Per-turn advantages of every episode (see :func:`gemgym.rl.compute_advantages`)."""
        return compute_advantages(
            estimator,
            self.rewards,
            gamma=gamma,
            group_ids=self.group_ids,
            values=values,
            lam=lam,
        )

    def summary(self) -> dict[str, float]:
        """Mean return, success rate and mean turns."""
        return summarize(self.episodes)

    def __len__(self) -> int:
        return len(self.episodes)


class Collector:
    """Collect episodes from a vector env with a batched policy.

    Args:
        env: a :class:`~gemgym.vector.VectorEnv` made with ``autoreset_mode="disabled"``, or an
            env id (then ``num_envs`` sync envs are made and owned by the collector).
        policy: ``policy(list) -> list of actions``, one per item.
        num_envs: envs when ``env`` is an id.
        group_size: episodes per initial state (1: every episode has its own seed).
        seed: first seed; group ``g`` of the collector's life is reset with ``seed + g``.
        history: pass the episodes in progress to the policy instead of the observations.
        max_turns: cut episodes after this many turns (they are then not ``done``).
        env_kwargs: keyword arguments for every env when ``env`` is an id.
        wrappers: wrapper factories applied to every env when ``env`` is an id.
        keep_errors: keep failed episodes in the batch (by default they are left out: their
            partial returns are not the policy's).
    """

    def __init__(
        self,
        env: VectorEnv | str,
        policy: BatchPolicy,
        *,
        num_envs: int = 8,
        group_size: int = 1,
        seed: int = 0,
        history: bool = False,
        max_turns: int | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        wrappers: Sequence[WrapperFactory] | None = None,
        keep_errors: bool = False,
    ) -> None:
        if group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        if isinstance(env, str):
            from gemgym.vector import make_vec

            self.env = make_vec(
                env,
                num_envs,
                autoreset_mode="disabled",
                wrappers=wrappers,
                **(env_kwargs or {}),
            )
            self._owned = True
        else:
            if env_kwargs or wrappers:
                raise ConfigError(
                    "env_kwargs and wrappers are for an env id; this vector env is already made"
                )
            if env.autoreset_mode.value != "disabled":
                raise ConfigError(
                    "the collector resets envs itself; make the vector env with "
                    'autoreset_mode="disabled"'
                )
            self.env = env
            self._owned = False
        self.env_id = self.env.env_ids[0] if self.env.env_ids else ""
        self.policy = policy
        self.group_size = group_size
        self.history = history
        self.max_turns = max_turns
        self.keep_errors = keep_errors
        engine_policy: Any = policy
        if not hasattr(policy, "act_batch") and not hasattr(policy, "act"):
            engine_policy = FunctionPolicy(policy, history=history)
        self._engine = Engine(
            engine_policy,
            EnvSource.make(self.env),
            concurrency=self.env.num_envs,
            max_turns=max_turns,
        )
        self._next_group = 0
        self._seed = seed
        self.records: list[Episode] = []
        """Every episode of the last collection, failed ones included."""

    @property
    def next_group(self) -> int:
        """The group id of the next initial state (reset with seed ``seed + next_group``)."""
        return self._next_group

    def state_dict(self) -> dict[str, int]:
        """Where the collector's seeds stand: ``{"next_group": g}`` (see :meth:`load_state_dict`)."""
        return {"next_group": self._next_group}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Continue from a :meth:`state_dict`: the next collection starts with its group."""
        group = state.get("next_group") if isinstance(state, Mapping) else None
        if isinstance(group, bool) or not isinstance(group, (int, np.integer)) or group < 0:
            raise ConfigError(
                f"a collector state is {{'next_group': int >= 0}} (from Collector.state_dict()), "
                f"got {state!r}"
            )
        self._next_group = int(group)

    def collect(self, num_episodes: int) -> Batch:
        """Play ``num_episodes`` episodes (a multiple of ``group_size``) and return them."""
        if num_episodes < 1 or num_episodes % self.group_size:
            raise ConfigError(
                f"num_episodes ({num_episodes}) must be a positive multiple of group_size "
                f"({self.group_size})"
            )
        groups: list[int] = []  # the group of each episode, in episode order
        for _ in range(num_episodes // self.group_size):
            groups.extend([self._next_group] * self.group_size)
            self._next_group += 1
        specs = [
            EpisodeSpec(k, episode_seed(self._seed, g), group=g, sample=k % self.group_size)
            for k, g in enumerate(groups)
        ]
        played = sorted(run_sync(lambda: self._engine.play(specs)), key=lambda ep: ep.index)
        self.records = played
        kept = [ep for ep in played if self.keep_errors or not ep.failed]
        left_out = [ep for ep in played if ep.failed and not self.keep_errors]
        return Batch(kept, [groups[ep.index] for ep in kept], errors=len(left_out), failed=left_out)

    def close(self) -> None:
        """Close the vector env if the collector made it."""
        self._engine.close()
        if self._owned:
            self.env.close()

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
