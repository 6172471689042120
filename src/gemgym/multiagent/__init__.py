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
from gemgym.multiagent.game import InvalidMove, Match, TextGame, register_game

if TYPE_CHECKING:
    from gemgym.multiagent._load import GameSource
    from gemgym.multiagent.env import TextAECEnv, TextObservation, TextParallelEnv
    from gemgym.multiagent.selfplay import Policy, SelfPlayEnv, agent_policy
    from gemgym.multiagent.vector import SeatVectorEnv

__all__ = [
    "InvalidMove",
    "Match",
    "Policy",
    "SeatVectorEnv",
    "SelfPlayEnv",
    "TextAECEnv",
    "TextGame",
    "TextObservation",
    "TextParallelEnv",
    "agent_policy",
    "list_games",
    "make",
    "make_parallel",
    "register_game",
]


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


__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "TextAECEnv": "gemgym.multiagent.env",
        "TextParallelEnv": "gemgym.multiagent.env",
        "TextObservation": "gemgym.multiagent.env",
        "SelfPlayEnv": "gemgym.multiagent.selfplay",
        "agent_policy": "gemgym.multiagent.selfplay",
        "Policy": "gemgym.multiagent.selfplay",
        "SeatVectorEnv": "gemgym.multiagent.vector",
    },
)
