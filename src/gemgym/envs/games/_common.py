"""Shared pieces of the text games: action parsing, GEM's reward constants, a game base class."""

from __future__ import annotations

import numbers
import re
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, TypeVar

from gemgym.core import Env, non_text_info
from gemgym.errors import ConfigError
from gemgym.turns import truncate

__all__ = [
    "DIRECTIONS",
    "FORMAT_ERROR_REWARD",
    "INTERNAL_STEP_REWARD",
    "INVALID_ACTION_REWARD",
    "SUCCESS_REWARD",
    "TURN_LIMIT_TEXT",
    "GameConfig",
    "GameEnv",
    "Step",
    "last_boxed",
    "last_boxed_match",
    "last_match",
    "parse_direction",
    "words_by_length",
]

SUCCESS_REWARD = 1.0
"""Reward for solving a game."""
INTERNAL_STEP_REWARD = 0.0
"""Reward of an ordinary, valid move."""
FAIL_REWARD = 0.0
"""Reward for losing a game."""
INVALID_ACTION_REWARD = 0.0
"""Reward of a well-formed but illegal move (out of range, repeated, blocked)."""
FORMAT_ERROR_REWARD = -0.1
"""Reward of an action with no parsable ``\\boxed{}`` answer; it also ends the episode (GEM)."""

_BOXED_RE = re.compile(r"\\boxed\{([^{}]*)\}")

DIRECTIONS = ("up", "down", "left", "right")
"""The moves of the grid games (FifteenPuzzle, Game2048, Sokoban)."""
_DIRECTION_RE = re.compile(r"\\boxed\{\s*(up|down|left|right)\s*\}", re.IGNORECASE)


def last_boxed(text: str, pattern: re.Pattern[str] | None = None) -> str | None:
    """Return the content of the last ``\\boxed{...}`` in ``text`` (or ``None``).

    With ``pattern``, return the last full match's first group of that pattern instead (GEM
    parses game actions with a game-specific regex and keeps the last match).
    """
    if not isinstance(text, str):
        return None
    if pattern is None or pattern.groups == 1:  # findall gives group 1: no Python loop
        found = (pattern or _BOXED_RE).findall(text)
        return found[-1] if found else None
    last = None
    for last in pattern.finditer(text):  # noqa: B007 - we want the last match
        pass
    return last.group(1) if last is not None else None


def last_match(text: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text`` (``None`` if none, or if ``text`` is no string)."""
    if not isinstance(text, str):
        return None
    last = None
    for last in pattern.finditer(text):  # noqa: B007 - we want the last match
        pass
    return last


def last_boxed_match(text: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """:func:`last_match` for a ``pattern`` that starts with ``\\boxed{`` and whose matches never
    contain another ``\\boxed{``: it tries the last box first (the common case) before scanning."""
    if not isinstance(text, str):
        return None
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    found = pattern.match(text, start)
    if found is not None:
        return found
    last = None
    for last in pattern.finditer(text, 0, start):  # noqa: B007 - we want the last match
        pass
    return last


_WORDS_BY_LENGTH: dict[str, dict[int, tuple[str, ...]]] = {}


def words_by_length(filename: str) -> dict[int, tuple[str, ...]]:
    """The upper-cased words of a list shipped in ``games/data/`` (one per line), by length.

    Loaded on first use and cached for the process; the tuples are shared, so never mutate the
    returned dict. ``.gz`` files are decompressed.
    """
    found = _WORDS_BY_LENGTH.get(filename)
    if found is None:
        from importlib.resources import files

        raw = files("gemgym.envs.games").joinpath("data", filename).read_bytes()
        if filename.endswith(".gz"):
            import gzip

            raw = gzip.decompress(raw)
        groups: dict[int, list[str]] = {}
        for word in raw.decode("ascii").split():
            groups.setdefault(len(word), []).append(word.upper())
        found = {n: tuple(ws) for n, ws in sorted(groups.items())}
        _WORDS_BY_LENGTH[filename] = found
    return found


def parse_direction(text: str) -> str | None:
    """The last ``\\boxed{up|down|left|right}`` of ``text`` (case-insensitive), lower-cased."""
    if not isinstance(text, str):
        return None
    found = _DIRECTION_RE.findall(text)
    return found[-1].lower() if found else None


@dataclass(frozen=True)
class GameConfig:
    """Base of the games' typed configs; subclasses add fields and override :meth:`validate`.

    Construction checks every field against its annotation (``int``, ``bool``, ``int | None``,
    ``tuple[int, int] | None``, ``Mapping[...]``) and raises :class:`~gemgym.errors.ConfigError`
    naming the parameter, so ``max_turns="five"`` fails at ``make()`` with a readable message
    instead of a comparison error later. It then checks the field every game has, once for all:
    ``max_turns`` (each game declares it, with its own default and place among its settings) is a
    positive int, or ``None`` where the game allows it (a random preset draws it, or the game
    derives it from its other settings); :meth:`validate` then checks the game's own values.

    The config is the env's one record of its settings: a game reads fixed settings from it
    (``env.config.hardcore``, or a read-only property of the same name) and keeps only what an
    episode draws (the size of a ``-random`` preset) as episode state
    (:attr:`GameEnv.episode_settings`).
    """

    def __post_init__(self) -> None:
        hints = _field_types(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            if not _matches(value, hints[f.name]):
                raise ConfigError(
                    f"{f.name} must be {_describe(hints[f.name])}, got {value!r} "
                    f"({type(value).__name__})"
                )
        turns = getattr(self, "max_turns", None)  # the type check above: an int or None
        if turns is not None and turns < 1:
            raise ConfigError(f"max_turns must be a positive int, got {turns}")
        self.validate()

    def validate(self) -> None:
        """Raise :class:`~gemgym.errors.ConfigError` for inconsistent values of the game's own
        settings (the types and ``max_turns`` are checked before)."""

    @property
    def is_random(self) -> bool:
        """Whether each episode draws its own size (a ``-random`` preset)."""
        return False


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _field_types(cls: type) -> dict[str, Any]:
    found = _FIELD_TYPES.get(cls)
    if found is None:
        found = _FIELD_TYPES[cls] = typing.get_type_hints(cls)
    return found


def _matches(value: object, hint: Any) -> bool:
    """Whether ``value`` fits ``hint`` (the annotations games use; ``bool`` is no ``int``)."""
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:  # numpy integers too (a sweep's values)
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            _matches(v, h) for v, h in zip(value, args, strict=True)
        )
    if origin is not None:  # another generic (Mapping[str, Any]): its class; items unchecked
        return isinstance(value, origin)
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    if hint is type(None):
        return "None"
    if hint is bool:
        return "a bool"
    if hint is int:
        return "an int"
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_describe(h) for h in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        return f"a tuple of {len(args)} ints" if all(a is int for a in args) else "a tuple"
    if origin is not None:
        hint = origin
    return f"a {getattr(hint, '__name__', hint)}"


Step = tuple[str, float, bool, bool, dict[str, Any]]
"""What :meth:`GameEnv.step` returns: ``(observation, reward, terminated, truncated, info)``."""

MoveT = TypeVar("MoveT")

TURN_LIMIT_TEXT = "You have reached the maximum number of turns."


class GameEnv(Env[str, str], Generic[MoveT]):
    """Base class of the text games: the episode structure, written once.

    A game's ``__init__`` takes its settings as typed keywords and passes its validated
    :class:`GameConfig` to ``super().__init__(config)``, which keeps it as :attr:`config` and
    copies the :attr:`episode_settings` into attributes.

    :meth:`reset` and :meth:`step` are templates; a game implements three hooks and may
    override a fourth:

    * :meth:`start_episode` sets up a new game after the reseed and returns its rules;
    * :meth:`parse_move` turns the model's text into a move (``None``: no parsable move, a
      format error: reward :data:`FORMAT_ERROR_REWARD`, ``terminated``);
    * :meth:`play_move` applies a move at turn :attr:`turn_count` and returns ``(observation,
      reward, outcome)``, ``outcome`` being ``True`` (won), ``False`` (lost) or ``None`` (the game
      goes on): won and lost end the episode with ``terminated=True``;
    * :meth:`turn_limit` turns the last step of an unfinished game at ``max_turns`` into its
      final observation and reward (default: the step's own reward, and the observation followed
      by "You have reached the maximum number of turns."); games with partial credit override it.

    The turn limit ends the episode by truncation only (``truncated=True``, ``terminated=False``,
    ``info["turn_limit"]=True``: :func:`gemgym.turns.truncate`, the rule of every turn limit), and a format error or a finished game at the last turn is not also truncated. Every step's
    ``info`` holds ``suffix`` (:meth:`get_task_suffix`) and ``turn``; the last step's also
    ``success`` and a format error's ``format_error``.

    An action that is not a ``str`` (a number, ``None``, bytes, a message dict) is scored as the
    empty reply (gemgym's one rule, :func:`gemgym.core.non_text_info`): a format error whose
    observation names the type, with ``info["non_text_action"]``.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "category": "game"}

    task_suffix: ClassVar[str | None] = None
    """A suffix that never changes (the game's prompt, no board): the template then uses it
    without calling :meth:`get_task_suffix` each step."""

    format_error_detail: ClassVar[str] = "you did not provide a valid action"
    """What the observation of a format error says after "At turn N, "."""

    episode_settings: ClassVar[tuple[str, ...]] = ("max_turns",)
    """The settings an episode may draw (a ``-random`` preset) or derive: :meth:`__init__` copies
    each from the config into an attribute of the same name, which the game reads (and a random
    preset's :meth:`start_episode` sets); a ``None`` setting keeps the class attribute's value, a
    placeholder until the first reset. Fixed settings are read from :attr:`config`."""

    config: GameConfig
    """The settings the env was made with (validated; read-only)."""
    turn_count: int = 0
    """Turns played in the current episode."""
    max_turns: int = 1
    """The turn limit of the current episode (the config's, or drawn by a random preset)."""

    def __init__(self, config: GameConfig) -> None:
        """Keep ``config`` and copy its :attr:`episode_settings` into attributes."""
        self.config = config
        for name in self.episode_settings:
            value = getattr(config, name)
            # every instance gets the same attributes in the same order (a None setting: the
            # placeholder), so attribute reads in step() stay on CPython's fast path
            setattr(self, name, getattr(self, name) if value is None else value)

    @property
    def is_random(self) -> bool:
        """Whether each episode draws its own size (the config's ``is_random``)."""
        return self.config.is_random

    # -- the templates -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reseed (``seed``), restart the turn count and the game (:meth:`start_episode`).

        Returns the rules and ``{"suffix": ...}`` (the first board or prompt); games take no
        ``options``.
        """
        if seed is not None:  # unseeded, the base reset does nothing: no call per episode
            super().reset(seed=seed)
        self.turn_count = 0
        obs = self.start_episode()
        suffix = self.task_suffix  # read after start_episode, which sets up the board
        return obs, {"suffix": self.get_task_suffix() if suffix is None else suffix}

    def step(self, action: str) -> Step:
        """Play one turn: count it, parse the move, play it, then apply the turn limit."""
        if not isinstance(action, str):  # the one rule: the empty reply, a format error
            return self._non_text(action)
        self.turn_count = turn = self.turn_count + 1
        move = self.parse_move(action)
        if move is None:
            return self._format_error(self.format_error_detail)
        obs, reward, outcome = self.play_move(move)
        out_of_turns = outcome is None and turn >= self.max_turns
        if out_of_turns:
            obs, reward = self.turn_limit(obs, reward)
        suffix = self.task_suffix  # read after the turn limit, which may change the board
        if suffix is None:
            suffix = self.get_task_suffix()
        info: dict[str, Any] = {"suffix": suffix, "turn": turn}
        if outcome is not None:
            info["success"] = outcome
            return obs, reward, True, False, info
        if out_of_turns:
            info["success"] = False
            return truncate((obs, reward, False, False, info))
        return obs, reward, False, False, info

    # -- the hooks -----------------------------------------------------------------------------
    def start_episode(self) -> str:
        """Set up a new game (drawing from :attr:`rng`) and return its rules."""
        raise NotImplementedError(f"{type(self).__name__} must implement start_episode()")

    def parse_move(self, action: str) -> MoveT | None:
        """The move in the model's reply ``action``, or ``None`` (a format error)."""
        raise NotImplementedError(f"{type(self).__name__} must implement parse_move()")

    def play_move(self, move: MoveT) -> tuple[str, float, bool | None]:
        """Apply ``move`` at turn :attr:`turn_count`: ``(observation, reward, outcome)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement play_move()")

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        """The final ``(observation, reward)`` when ``max_turns`` is reached unfinished."""
        return f"{obs}\n{TURN_LIMIT_TEXT}", reward

    # -- helpers -------------------------------------------------------------------------------
    def get_task_suffix(self) -> str:
        """The text GEM appends after the observation (board state, "Enter your guess")."""
        return self.task_suffix or ""

    def _info(self, **extra: Any) -> dict[str, Any]:
        info: dict[str, Any] = {"suffix": self.get_task_suffix(), "turn": self.turn_count}
        info.update(extra)
        return info

    def _non_text(self, action: object) -> Step:
        self.turn_count += 1
        obs, reward, terminated, truncated, info = self._format_error(
            f"your reply was not text (got {type(action).__name__})"
        )
        info.update(non_text_info(action))
        return obs, reward, terminated, truncated, info

    def _format_error(self, detail: str = "you did not provide a valid action") -> Step:
        obs = f"At turn {self.turn_count}, {detail}."
        return obs, FORMAT_ERROR_REWARD, True, False, self._info(format_error=True, success=False)
