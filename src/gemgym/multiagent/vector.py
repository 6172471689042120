"""Every seat of many games at once: :class:`SeatVectorEnv`.

``SeatVectorEnv(game, num_games)`` holds ``num_games`` games of ``P`` seats and exposes
``num_games * P`` *slots*: slot ``g * P + s`` is seat ``s`` of game ``g``. One ``step`` takes an
action per slot and plays, in every game, the seats whose turn it is (``info["to_act"]``; the
other slots' actions are ignored, ``None`` is fine there), so one batched model call per step
serves every seat of every game (self-play at scale). Use :meth:`acting_slots` to ask the model
only for the slots that move.

The step result follows :class:`gemgym.vector.VectorEnv`: ``(observations, rewards, terminated,
truncated, infos)`` with numpy arrays for the middle three. A slot's reward is what its seat earned
at this step (invalid-move penalty, payoff at the end). A game that ends is reset in the same step
(``same_step`` autoreset): the slot's observation and info are the new game's, and the terminal
ones are in ``info["final_obs"]`` / ``info["final_info"]``. Game ``g`` is seeded ``seed + g`` at
``reset(seed=)``; later games continue each game's own generator.

It also answers ``call(name, indices=)`` for ``"expert_action"`` and ``"sample_random_action"``,
so :class:`~gemgym.agents.OracleAgent` and :class:`~gemgym.agents.RandomAgent` can play slots.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gemgym.core import _check_seed
from gemgym.errors import ConfigError, ResetNeeded, VectorEnvError
from gemgym.multiagent._load import GameSource, load_match
from gemgym.multiagent.game import Match

__all__ = ["SeatVectorEnv"]


class SeatVectorEnv:
    """``num_games`` games, one slot per seat (see the module docstring).

    Args:
        game: a registered id, an entry point or a :class:`~gemgym.multiagent.game.TextGame`
            factory (one game is built per slot group).
        num_games: how many games run side by side.
        game_kwargs: keyword arguments of the game.
        max_invalid_moves: rejected moves in a row after which a seat forfeits.
        invalid_move_penalty: reward of a rejected move.
    """

    def __init__(
        self,
        game: GameSource,
        num_games: int,
        *,
        game_kwargs: Mapping[str, Any] | None = None,
        max_invalid_moves: int = 3,
        invalid_move_penalty: float = -0.1,
    ) -> None:
        if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 1:
            raise ConfigError(f"num_games must be a positive int, got {num_games!r}")
        self.matches = [
            load_match(game, game_kwargs, max_invalid_moves, invalid_move_penalty)
            for _ in range(num_games)
        ]
        self.seats: tuple[str, ...] = self.matches[0].possible_agents
        self.num_games = num_games
        self.num_envs = num_games * len(self.seats)
        self._rngs = [random.Random() for _ in range(num_games)]
        self._started = False
        self._closed = False

    def __len__(self) -> int:
        return self.num_envs

    def slot(self, game: int, seat: str) -> int:
        """The slot of ``seat`` in game ``game``."""
        return game * len(self.seats) + self.seats.index(seat)

    def _where(self, slot: int) -> tuple[Match, str]:
        if not 0 <= slot < self.num_envs:
            raise ConfigError(f"slot {slot} out of range (0..{self.num_envs - 1})")
        g, s = divmod(slot, len(self.seats))
        return self.matches[g], self.seats[s]

    def acting_slots(self) -> list[int]:
        """The slots whose seat moves at the next step."""
        return [self.slot(g, seat) for g, m in enumerate(self.matches) for seat in m.acting()]

    def _check(self) -> None:
        if self._closed:
            raise VectorEnvError("SeatVectorEnv is closed")
        if not self._started:
            raise ResetNeeded("call reset() before step()")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Start every game: one observation and info per slot."""
        if self._closed:
            raise VectorEnvError("SeatVectorEnv is closed")
        if seed is not None:
            seed = _check_seed(seed)
            self._rngs = [random.Random(seed + g) for g in range(self.num_games)]
        for m, rng in zip(self.matches, self._rngs, strict=True):
            m.reset(rng)
        self._started = True
        obs, infos = [], []
        for slot in range(self.num_envs):
            m, seat = self._where(slot)
            obs.append(m.observe(seat))
            infos.append(m.info(seat))
        return obs, infos

    def step(
        self, actions: Sequence[Any] | Mapping[int, Any]
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Play the acting slots' actions in every game (see the module docstring)."""
        self._check()
        if not isinstance(actions, Mapping):
            if len(actions) != self.num_envs:
                raise ConfigError(f"expected {self.num_envs} actions (one per slot)")
            actions = dict(enumerate(actions))
        p = len(self.seats)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        obs: list[str] = [""] * self.num_envs
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for g, m in enumerate(self.matches):
            for seat in m.acting():
                if m.over:
                    break
                got, _ = m.play_move(seat, actions.get(self.slot(g, seat)))
                for s, name in enumerate(self.seats):
                    rewards[g * p + s] += got[name]
            over = m.over
            finals = [(m.observe(seat), m.info(seat)) for seat in self.seats]
            if over:
                m.reset(self._rngs[g])
            for s, seat in enumerate(self.seats):
                slot = g * p + s
                terminated[slot] = over
                if over:
                    obs[slot], infos[slot] = m.observe(seat), m.info(seat)
                    infos[slot]["final_obs"], infos[slot]["final_info"] = finals[s]
                else:
                    obs[slot], infos[slot] = finals[s]
        return obs, rewards, terminated, np.zeros(self.num_envs, dtype=bool), infos

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None) -> list[Any]:
        """``expert_action`` or ``sample_random_action`` of the chosen slots' seats."""
        self._check()
        slots = range(self.num_envs) if indices is None else indices
        out = []
        for slot in slots:
            m, seat = self._where(slot)
            if name == "expert_action":
                out.append(m.game.expert_action(seat))
            elif name == "sample_random_action":
                out.append(m.game.random_action(seat, self._rngs[slot // len(self.seats)]))
            else:
                raise ConfigError(
                    f"SeatVectorEnv.call supports 'expert_action' and 'sample_random_action', "
                    f"not {name!r}"
                )
        return out

    def close(self) -> None:
        """Release the games (idempotent)."""
        self._closed = True

    def __enter__(self) -> SeatVectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
