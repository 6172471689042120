"""Turn limits, written once: the rule the games, :class:`~gemgym.wrappers.TimeLimit` and
:class:`~gemgym.wrappers.ToolEnvWrapper` all cut episodes with (:func:`truncate`), and the
counter the wrappers keep (:class:`TurnCounter`).

The rule everywhere: the step that plays the last allowed turn of an episode that has not ended
returns ``truncated=True`` (never together with ``terminated``: a terminal state at the last turn
wins) and ``info["turn_limit"] = True``, whichever layer holds the limit.

>>> turns = TurnCounter(limit=2)
>>> turns.tick(), turns.tick()
(False, True)
>>> turns.cut(("obs", 0.0, False, False, {}))
('obs', 0.0, False, True, {'turn_limit': True})
>>> turns.restart(); turns.count
0
"""

from __future__ import annotations

import numbers
from typing import Any

from gemgym.core import StepResult
from gemgym.errors import ConfigError

__all__ = ["TURN_LIMIT_INFO_KEY", "TurnCounter", "check_turn_limit", "truncate"]

TURN_LIMIT_INFO_KEY = "turn_limit"
"""The ``info`` key set to ``True`` on the step a turn limit truncated."""


def check_turn_limit(value: object, name: str = "max_turns") -> int | None:
    """``value`` as a turn limit (a positive int, or ``None`` for none); else a named error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be a positive int or None, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {value}")
    return int(value)


def truncate(result: StepResult[Any]) -> StepResult[Any]:
    """``result`` as the last step a turn limit allows: truncated, unless it already ended.

    The games count their own turns (``turn_count``, ``max_turns``: state of the game they play)
    and apply this rule at their limit; :class:`TurnCounter` counts for the wrappers.
    """
    obs, reward, terminated, truncated, info = result
    if terminated or truncated:
        return result
    info[TURN_LIMIT_INFO_KEY] = True
    return obs, reward, False, True, info


class TurnCounter:
    """The turns played in the current episode and the limit on them (``None``: no limit)."""

    __slots__ = ("count", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = check_turn_limit(limit)
        self.count = 0

    def restart(self) -> None:
        """A new episode: the count goes back to 0."""
        self.count = 0

    def tick(self) -> bool:
        """Count one turn; true when it was the last one the limit allows."""
        self.count += 1
        return self.limit is not None and self.count >= self.limit

    @property
    def reached(self) -> bool:
        """Whether the turns played have reached the limit."""
        return self.limit is not None and self.count >= self.limit

    def cut(self, result: StepResult[Any]) -> StepResult[Any]:
        """``result`` truncated by the limit when it is reached and the episode goes on."""
        return truncate(result) if self.reached else result

    def __repr__(self) -> str:
        return f"TurnCounter(count={self.count}, limit={self.limit})"
