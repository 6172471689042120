"""Experience: the :class:`Episode` record, :func:`rollout`, JSONL in and out.

:func:`rollout` (``gemgym run``) plays its episodes with the episode engine
(:class:`gemgym.episodes.Engine`), as :class:`gemgym.rl.Collector`, token rollouts and
``gemgym eval`` do. :class:`Episode` and :class:`Transition` are the engine's one record
(:class:`gemgym.episodes.Episode`, :class:`gemgym.episodes.Turn`).

>>> import gemgym
>>> from gemgym.agents import OracleAgent
>>> eps = list(gemgym.rollout("game:GuessTheNumber-v0-easy", OracleAgent(), episodes=3, seed=0))
>>> all(e.success for e in eps)
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gemgym.core import Env
from gemgym.episodes.engine import Engine, EnvSource, EpisodeSpec, run_sync
from gemgym.episodes.outcomes import episode_seed
from gemgym.episodes.policy import AgentPolicy, BatchPolicy, Policy
from gemgym.episodes.record import Episode, Turn, read_episodes, write_episodes
from gemgym.errors import ConfigError

if TYPE_CHECKING:
    from gemgym.agents.base import Agent
    from gemgym.vector import VectorEnv

__all__ = ["Episode", "Transition", "read_jsonl", "rollout", "summarize", "write_jsonl"]

Transition = Turn
"""One turn of an :class:`Episode` (the engine's :class:`~gemgym.episodes.Turn`)."""


def write_jsonl(
    episodes: Iterable[Episode], path: str | Path | IO[str], *, append: bool = False
) -> int:
    """Write episodes as JSON lines (one episode a line, each flushed as it comes, so a run
    stopped at any moment keeps what finished); returns how many were written. ``append``:
    add to the file instead of replacing it."""
    if isinstance(path, str | Path):
        with open(path, "a" if append else "w", encoding="utf-8", buffering=1) as f:
            return write_episodes(episodes, f)
    return write_episodes(episodes, path)


def read_jsonl(path: str | Path) -> Iterator[Episode]:
    """Read episodes written by :func:`write_jsonl` (or ``gemgym run --out``)."""
    return read_episodes(path)


def rollout(
    env: str | Env[Any, Any] | VectorEnv,
    agent: Agent | Policy | BatchPolicy,
    *,
    episodes: int,
    seed: int | None = None,
    batch_size: int = 1,
    max_steps: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    **make_kwargs: Any,
) -> Iterator[Episode]:
    """Run ``agent`` for ``episodes`` episodes and yield each :class:`Episode` as it ends.

    Episode ``k`` is reset with ``seed + k`` (when a seed is given), whichever env copy plays it,
    so results do not depend on ``batch_size`` or on the vector backend. ``batch_size`` envs
    play at once and the agent gets their observations as one batch (an LLM agent then sends its
    requests concurrently). The episodes are played by the episode engine
    (:class:`gemgym.episodes.Engine`); the agent gets observations and slot ids, never env
    objects (its ``venv`` reaches only the envs' expert and random actions).

    Args:
        env: an env id (made with ``make_kwargs``), an env (copied with ``spawn``) or a
            :class:`~gemgym.vector.VectorEnv` made with ``autoreset_mode="disabled"`` (any
            backend; all its envs play, ``batch_size`` is not used, and it is not closed).
        agent: any :class:`~gemgym.agents.Agent`, or an engine policy
            (:mod:`gemgym.episodes.policy`).
        episodes: how many episodes to play.
        seed: base seed; ``None`` leaves episodes unseeded.
        batch_size: envs played in parallel.
        max_steps: the turn cap: an episode that reaches it is truncated (``truncation=
            "max_turns"``; it is then not ``done``).
        on_episode: called with each finished episode (e.g. to update a progress bar).
    """
    from gemgym.vector import VectorEnv

    if episodes < 0:
        raise ConfigError(f"episodes must be >= 0, got {episodes}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(env, VectorEnv):
        concurrency = env.num_envs
    elif min(batch_size, episodes) == 0:
        return
    else:
        concurrency = min(batch_size, episodes)
    engine = Engine(as_policy(agent), EnvSource.make(env, **make_kwargs), concurrency=concurrency,
                    max_turns=max_steps)  # fmt: skip
    specs = (EpisodeSpec(k, episode_seed(seed, k)) for k in range(episodes))
    try:
        for ep in run_sync(lambda: engine.play(specs)):
            if on_episode is not None:
                on_episode(ep)
            yield ep
    finally:
        engine.close()


def as_policy(agent: Agent | Policy | BatchPolicy) -> Policy | BatchPolicy:
    """A policy as it is, an :class:`~gemgym.agents.Agent` through
    :class:`~gemgym.episodes.AgentPolicy`."""
    import inspect

    if hasattr(agent, "act_batch") or inspect.iscoroutinefunction(getattr(agent, "act", None)):
        return agent  # type: ignore[return-value]
    return AgentPolicy(agent)  # type: ignore[arg-type]


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean return, success rate, mean number of turns and failed episodes of some episodes.

    Failed episodes (``finish_reason == "error"``) stay in every denominator: they count as
    unsuccessful, so failures cannot raise a score.
    """
    n = len(episodes)
    errors = sum(e.failed for e in episodes)
    if n == 0:
        return {"episodes": 0, "mean_return": 0.0, "success_rate": 0.0, "mean_turns": 0.0,
                "errors": 0}  # fmt: skip
    return {
        "episodes": n,
        "mean_return": sum(e.total_return for e in episodes) / n,
        "success_rate": sum(e.success for e in episodes) / n,
        "mean_turns": sum(e.length for e in episodes) / n,
        "errors": errors,
    }
