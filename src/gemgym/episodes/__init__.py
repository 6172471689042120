"""The episode engine and its records: one loop under every front end.

* :mod:`gemgym.episodes.engine`: :class:`Engine` plays many episodes concurrently over env
  sources (ids, envs, vector envs, remote envs) with one policy; env I/O never holds its loop.
* :mod:`gemgym.episodes.policy`: the policy protocol (:class:`ActRequest` in,
  :class:`Action` out; a policy never receives an env object, only :class:`EnvAccess`).
* :mod:`gemgym.episodes.record`: :class:`Episode` and :class:`Turn`, the one record (text,
  optional token ids, log-probs and masks, rewards, infos, timings, the failure's stage).
* :mod:`gemgym.episodes.outcomes`: success, how episodes end, the turn cap and the seeds.

>>> from gemgym.agents import OracleAgent
>>> from gemgym.episodes import AgentPolicy, Engine, EpisodeSpec
>>> engine = Engine(AgentPolicy(OracleAgent()), "game:GuessTheNumber-v0-easy", concurrency=4)
>>> import asyncio
>>> eps = asyncio.run(engine.run([EpisodeSpec(k, seed=k) for k in range(8)]))
>>> engine.close()
>>> [e.success for e in eps] == [True] * 8
True

Front ends on top of it: :func:`gemgym.rollout` and ``gemgym run``,
:class:`gemgym.rl.Collector` and the reference trainer, :func:`gemgym.llm.rollout_tokens` (and
the TRL, verl, Oat and Tinker integrations through it), ``gemgym eval``.
"""

from __future__ import annotations

from gemgym.episodes.engine import Engine, EngineStats, EnvSource, EpisodeSpec, Recorder, run_sync
from gemgym.episodes.outcomes import (
    Finish,
    Stage,
    TruncationCause,
    derive_seed,
    episode_seed,
    is_success,
    turn_cap_reached,
)
from gemgym.episodes.policy import (
    Action,
    ActRequest,
    AgentPolicy,
    BatchPolicy,
    EnvAccess,
    FunctionPolicy,
    Policy,
)
from gemgym.episodes.record import Episode, ObservationRole, Turn

__all__ = [
    "ActRequest",
    "Action",
    "AgentPolicy",
    "BatchPolicy",
    "Engine",
    "EngineStats",
    "EnvAccess",
    "EnvSource",
    "Episode",
    "EpisodeSpec",
    "Finish",
    "FunctionPolicy",
    "ObservationRole",
    "Policy",
    "Recorder",
    "Stage",
    "TruncationCause",
    "Turn",
    "derive_seed",
    "episode_seed",
    "is_success",
    "run_sync",
    "turn_cap_reached",
]
