"""Multi-agent text games with PettingZoo's API (see ``docs/multiagent.md``).

* :class:`TextGame` (:mod:`gemgym.multiagent.game`): the rules of a game; built-in ones are the
  ``ma:*`` ids (TicTacToe, Kuhn poker, a negotiation), TextArena's are ``ta:*``.
* :func:`make` / :func:`make_parallel`: a game as PettingZoo's turn-based AEC env
  (:class:`TextAECEnv`) or its simultaneous Parallel env (:class:`TextParallelEnv`).
* :class:`SelfPlayEnv`: one seat as a single-agent :class:`gemgym.Env` with opponent policies
  (what ``gemgym.make("ma:...")`` returns), so every trainer and vector env works with self-play.
* :class:`SeatVectorEnv`: every seat of many games as the slots of one vector env.

Names follow PettingZoo: ``agents``, ``possible_agents``, ``agent_selection``, ``rewards``,
``terminations``, ``truncations``, ``infos``, ``observation_space(agent)``,
``action_space(agent)``, ``last()``, ``agent_iter()``. Importing this package imports neither
PettingZoo nor gymnasium; the env forms do (``pip install "gemgym[multiagent]"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gemgym._lazy import lazy_exports
from gemgym.multiagent.game import (
    InvalidMove as InvalidMove,
    Match as Match,
    TextGame as TextGame,
    register_game as register_game,
)

if TYPE_CHECKING:
    from gemgym.multiagent._load import GameSource
    from gemgym.multiagent.env import (
        TextAECEnv as TextAECEnv,
        TextObservation as TextObservation,
        TextParallelEnv as TextParallelEnv,
    )
    from gemgym.multiagent.selfplay import (
        Policy as Policy,
        SelfPlayEnv as SelfPlayEnv,
        agent_policy as agent_policy,
    )
    from gemgym.multiagent.vector import (
        SeatVectorEnv as SeatVectorEnv,
    )


def make(game: GameSource, **kwargs: Any) -> TextAECEnv:
    """The turn-based (AEC) env of ``game`` (an id such as ``"ma:TicTacToe-v0"``).

    Keyword arguments go to :class:`TextAECEnv` (``game_kwargs=``, ``max_invalid_moves=``, ...).
    """
    from gemgym.multiagent.env import TextAECEnv

    return TextAECEnv(game, **kwargs)


def make_parallel(game: GameSource, **kwargs: Any) -> TextParallelEnv:
    """The simultaneous (Parallel) env of ``game``; keyword arguments as :func:`make`."""
    from gemgym.multiagent.env import TextParallelEnv

    return TextParallelEnv(game, **kwargs)


def list_games(pattern: str | None = None) -> list[str]:
    """The registered multi-agent game ids (``ma:*`` and the multi-player ``ta:*``)."""
    from gemgym.multiagent._load import _SELFPLAY
    from gemgym.registry import list_envs, registry

    out = []
    for env_id in list_envs(pattern):
        spec = registry.spec(env_id)
        kwargs: Mapping[str, Any] = spec.kwargs
        if spec.entry_point == _SELFPLAY and isinstance(kwargs.get("game"), str):
            out.append(env_id)
    return out


__getattr__, __dir__ = lazy_exports(globals())
