"""Exploits that beat random *legitimately*, with the reason the env's card gives.

Some envs pay a fixed reply honestly: a binary task where always answering the majority label is
right more often than the random agent's (deliberately format-only) answers, a game where one move
repeated is a fair strategy. Such a pair is still measured and shown (``(card)`` in the report),
but it is not flagged and does not fail ``gemgym audit``. Each entry names the env ids (a glob),
the exploit and the reason; the same reason is in the env's module docstring (its card).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

__all__ = ["EXPECTED", "Expected", "expected_reason"]


@dataclass(frozen=True)
class Expected:
    """An exploit that may beat random on the envs matching ``pattern``, and why."""

    pattern: str
    policy: str
    reason: str


_BINARY = (
    "RuleTaker answers are True/False: a fixed label is right about half the time, the random "
    "action (a random short answer) almost never; the base rate, not an exploit "
    "(gemgym.envs.qa's card)"
)

_MINES = (
    "Minesweeper's first reveal is always safe and pays the cells its flood fill uncovers: "
    "another board's expert sequence opens with a reveal and wastes no turn on flags or "
    "revealed cells, as the random action does; a fair opening, not an exploit "
    "(gemgym.envs.games.minesweeper's card)"
)

EXPECTED: tuple[Expected, ...] = (
    Expected("game:Minesweeper-*", "copy_other", _MINES),
    Expected("logic:RuleTaker-*", "copy_majority", _BINARY),
    Expected("logic:RuleTaker-*", "copy_other", _BINARY),
    Expected("logic:RuleTaker-*", "constant", _BINARY),
)
"""The known legitimate cases (see the module docstring)."""


def expected_reason(env: str, policy: str) -> str | None:
    """The card's reason when ``policy`` may beat random on ``env``, else ``None``."""
    for e in EXPECTED:
        if e.policy == policy and fnmatch.fnmatchcase(env, e.pattern):
            return e.reason
    return None
