r"""The rules side of a multi-agent text game: :class:`TextGame` and :class:`Match`.

A :class:`TextGame` holds the rules and the state of one game and nothing else: who may act now,
what each seat sees, what a move does, the payoffs at the end, an expert per seat. It imports
nothing heavy (the registry imports game modules while it lists ids), and it knows nothing of
PettingZoo.

A :class:`Match` runs a game for the env forms (:class:`~gemgym.multiagent.TextAECEnv`,
:class:`~gemgym.multiagent.TextParallelEnv`, :class:`~gemgym.multiagent.SelfPlayEnv`,
:class:`~gemgym.multiagent.SeatVectorEnv`) with the rules they share: a move that is not text or
that the game rejects earns ``invalid_move_penalty`` and an observation that says what was wrong,
the seat tries again, and after ``max_invalid_moves`` rejected moves in a row it forfeits. A model
never crashes a game: a move that is not a ``str`` is an invalid move (gemgym's one rule for
non-text actions), and the reason shown is cut to :data:`MAX_ERROR_CHARS` characters.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from gemgym.core import excerpt
from gemgym.errors import ConfigError

__all__ = ["MAX_ERROR_CHARS", "InvalidMove", "Match", "TextGame", "register_game"]

MAX_ERROR_CHARS = 400
"""The most characters of an :class:`InvalidMove` message a seat is shown (longer messages, which
quote a huge move, are cut to an :func:`~gemgym.core.excerpt`)."""


class InvalidMove(Exception):
    """Raised by :meth:`TextGame.play_move` for a move the rules reject; the message is shown to the
    seat that played it (so it says what a valid move looks like)."""


class TextGame:
    """Rules and state of one text game (see the module docstring).

    Subclasses set :attr:`possible_agents` (in the constructor or as a class attribute) and
    implement :meth:`new_game`, :meth:`acting`, :meth:`observe`, :meth:`play_move`,
    :meth:`returns`, :meth:`forfeit`, :meth:`legal_actions` and :meth:`expert_action`.
    (``play_move`` was called ``play``: a subclass that still defines ``play`` keeps working,
    with a :class:`DeprecationWarning` when it is defined.)

    Turn-based games have one seat in :meth:`acting`; simultaneous games list every seat that
    still has to move this round and resolve the round when the last one has played.
    """

    possible_agents: tuple[str, ...] = ()
    simultaneous: ClassVar[bool] = False
    """Whether several seats act at once (a round resolves when all of :meth:`acting` played)."""
    rng: random.Random

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        old = cls.__dict__.get("play")
        if callable(old) and "play_move" not in cls.__dict__:  # the hook's old name
            warnings.warn(
                f"{cls.__qualname__}.play: the move hook of TextGame is now play_move; rename "
                "the method (play is read as play_move for now)",
                DeprecationWarning,
                stacklevel=2,
            )
            cls.play_move = old  # type: ignore[method-assign]

    def new_game(self, rng: random.Random) -> None:
        """Start a game; ``rng`` is the env's seeded generator (keep it for chance and experts)."""
        raise NotImplementedError

    def acting(self) -> tuple[str, ...]:
        """The seats that must move now (empty once the game is over)."""
        raise NotImplementedError

    def is_over(self) -> bool:
        """Whether the game has ended."""
        return not self.acting()

    def observe(self, agent: str) -> str:
        """What ``agent`` sees now (rules, board, the last moves, its private information)."""
        raise NotImplementedError

    def play_move(self, agent: str, action: str) -> None:
        """Apply ``agent``'s move; raise :class:`InvalidMove` (with what is wrong) to reject it."""
        raise NotImplementedError

    def returns(self) -> dict[str, float]:
        """The payoff of every seat; called once the game is over."""
        raise NotImplementedError

    def forfeit(self, agent: str) -> None:
        """End the game because ``agent`` made too many invalid moves in a row."""
        raise NotImplementedError

    def legal_actions(self, agent: str) -> list[str]:
        """Well-formed, legal moves for ``agent`` now (the random policy draws from them)."""
        raise NotImplementedError

    def action_vocabulary(self, agent: str) -> Sequence[str]:
        """Well-formed moves (legal or not) that ``action_space(agent).sample()`` draws from."""
        return self.legal_actions(agent)

    def expert_action(self, agent: str) -> str:
        """What an expert plays for ``agent`` now (may use :attr:`rng` for mixed strategies)."""
        raise NotImplementedError

    def random_action(self, agent: str, rng: random.Random) -> str:
        """A uniformly random legal move."""
        return rng.choice(self.legal_actions(agent))

    def render(self) -> str:
        """The public state as text (what a spectator sees)."""
        return ""


class Match:
    """A :class:`TextGame` played under the shared rules for bad moves (module docstring).

    Args:
        game: the game (its state is reset by :meth:`reset`).
        max_invalid_moves: rejected moves in a row after which a seat forfeits.
        invalid_move_penalty: reward of a rejected move (added to the seat's reward at once).
    """

    def __init__(
        self, game: TextGame, *, max_invalid_moves: int = 3, invalid_move_penalty: float = -0.1
    ) -> None:
        if isinstance(max_invalid_moves, bool) or not isinstance(max_invalid_moves, int):
            raise ConfigError(f"max_invalid_moves must be an int, got {max_invalid_moves!r}")
        if max_invalid_moves < 1:
            raise ConfigError(f"max_invalid_moves must be at least 1, got {max_invalid_moves}")
        if not game.possible_agents:
            raise ConfigError(f"{type(game).__name__} has no possible_agents")
        self.game = game
        self.max_invalid_moves = max_invalid_moves
        self.invalid_move_penalty = float(invalid_move_penalty)
        self.errors: dict[str, str] = {}
        self.invalid_streak: dict[str, int] = {}
        self.forfeited: str | None = None
        self.moves = 0

    @property
    def possible_agents(self) -> tuple[str, ...]:
        return self.game.possible_agents

    def reset(self, rng: random.Random) -> None:
        """Start a new game drawn from ``rng`` (the game gets a generator of its own, seeded from
        ``rng``, so that drawing random actions from ``rng`` leaves the game's chance alone)."""
        self.game.new_game(random.Random(rng.getrandbits(64)))
        self.errors = {}
        self.invalid_streak = dict.fromkeys(self.game.possible_agents, 0)
        self.forfeited = None
        self.moves = 0

    def acting(self) -> tuple[str, ...]:
        return () if self.forfeited is not None else self.game.acting()

    @property
    def over(self) -> bool:
        return self.forfeited is not None or self.game.is_over()

    def observe(self, agent: str) -> str:
        """The game's observation for ``agent``, with the reason its last move was rejected."""
        text = self.game.observe(agent)
        err = self.errors.get(agent)
        if self.forfeited is not None:
            who = "You" if self.forfeited == agent else self.forfeited
            text += f"\n\n{who} forfeited after {self.max_invalid_moves} invalid moves in a row" + (
                f" (last: {err})." if err is not None else "."
            )
        elif err is not None and not self.over:
            left = self.max_invalid_moves - self.invalid_streak.get(agent, 0)
            text += (
                f"\n\nYour last move was invalid: {err}\nTry again "
                f"({left} invalid move{'s' if left != 1 else ''} left before you forfeit)."
            )
        return text

    def play_move(self, agent: str, action: Any) -> tuple[dict[str, float], str | None]:
        """Play ``agent``'s move under the shared rules: ``(rewards of this move per seat, error
        or None)``.

        The rewards hold the invalid-move penalty and, when this move ended the game, every seat's
        payoff (:meth:`TextGame.returns`).
        """
        rewards = dict.fromkeys(self.game.possible_agents, 0.0)
        if agent not in self.acting():
            raise ConfigError(f"{agent!r} cannot move now; seats to move: {self.acting()}")
        error: str | None = None
        if not isinstance(action, str):  # gemgym's one rule: an invalid move, like an empty one
            error = f"a move is text, got {type(action).__name__}"
        else:
            try:
                self.game.play_move(agent, action)
            except InvalidMove as e:  # the message may quote the move: echo a bounded excerpt
                error = excerpt(str(e), MAX_ERROR_CHARS) or "that move is not allowed"
        self.moves += 1
        if error is None:
            self.errors.pop(agent, None)
            self.invalid_streak[agent] = 0
        else:
            self.errors[agent] = error
            self.invalid_streak[agent] = self.invalid_streak.get(agent, 0) + 1
            rewards[agent] += self.invalid_move_penalty
            if self.invalid_streak[agent] >= self.max_invalid_moves:
                self.game.forfeit(agent)
                self.forfeited = agent
        if self.over:
            for a, r in self.game.returns().items():
                rewards[a] += float(r)
        return rewards, error

    def info(self, agent: str) -> dict[str, Any]:
        """The info dict of ``agent`` now."""
        info: dict[str, Any] = {"to_act": agent in self.acting()}
        err = self.errors.get(agent)
        if err is not None:
            info["invalid_move"] = err
        if self.over:
            info["returns"] = self.game.returns()
            if self.forfeited is not None:
                info["forfeited"] = self.forfeited
        return info


def register_game(
    id: str,
    game: str,
    *,
    game_kwargs: Mapping[str, Any] | None = None,
    description: str = "",
    extra: str | None = None,
) -> None:
    """Register a multi-agent game under ``id`` (by string entry point, nothing imported).

    ``gemgym.make(id)`` then builds its single-agent view (:class:`~gemgym.multiagent.SelfPlayEnv`:
    the learner in the first seat against random opponents) and ``gemgym.multiagent.make(id)``
    / ``make_parallel(id)`` its PettingZoo-style forms.

    Args:
        id: the env id (``ma:Name-v0``).
        game: ``"package.module:GameClass"``, a :class:`TextGame` factory.
        game_kwargs: default keyword arguments of the game.
        description: one line for ``gemgym list``.
        extra: the ``gemgym[extra]`` the game needs.
    """
    from gemgym.registry import register

    register(
        id,
        "gemgym.multiagent.selfplay:SelfPlayEnv",
        kwargs={"game": game, "game_kwargs": dict(game_kwargs or {})},
        description=description,
        extra=extra,
    )
