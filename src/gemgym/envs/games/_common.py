"""Shared pieces of the text games: action parsing, GEM's reward constants, a game base class."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from gemgym.core import Env

__all__ = [
    "DIRECTIONS",
    "FORMAT_ERROR_REWARD",
    "INTERNAL_STEP_REWARD",
    "INVALID_ACTION_REWARD",
    "SUCCESS_REWARD",
    "GameEnv",
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
    if pattern is None:
        found = _BOXED_RE.findall(text)
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
    found = last_boxed(text, _DIRECTION_RE)
    return found.lower() if found is not None else None


@dataclass(frozen=True)
class GameConfig:
    """Base of the games' typed configs; subclasses add fields and override :meth:`validate`."""

    def validate(self) -> None:
        """Raise :class:`~gemgym.errors.ConfigError` for inconsistent values."""


class GameEnv(Env[str, str]):
    """Base class of the text games: turn counting and GEM's ``info["suffix"]`` convention.

    Subclasses set :attr:`turn_count` through :meth:`_next_turn` and return GEM-style steps.
    The episode ends by truncation (``truncated=True``, ``terminated=False``) when the game's own
    ``max_turns`` rule is reached without a terminal outcome.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "category": "game"}

    turn_count: int = 0
    max_turns: int = 1

    def get_task_suffix(self) -> str:
        """The text GEM appends after the observation (board state, "Enter your guess")."""
        return ""

    def _info(self, **extra: Any) -> dict[str, Any]:
        info: dict[str, Any] = {"suffix": self.get_task_suffix(), "turn": self.turn_count}
        info.update(extra)
        return info

    def _format_error(
        self, detail: str = "you did not provide a valid action"
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs = f"At turn {self.turn_count}, {detail}."
        return obs, FORMAT_ERROR_REWARD, True, False, self._info(format_error=True, success=False)
