"""Outcomes: how an episode ends, whether it succeeded, and where every seed comes from.

This module is the one place that defines these rules; every front end (``gemgym run``,
``gemgym eval``, token rollouts, the trainer, the integrations) asks it.

**Success** (:func:`is_success`): the env's ``info["success"]`` on the last step, else the
episode terminated with a positive reward.

**How an episode ends** (:data:`Finish`): the env terminated it (``"env_end"``); it was
truncated (``"truncation"``, with a :data:`TruncationCause`: the env's own limit, the rollout's
turn cap, the model's context window, or a first prompt that does not fit at all); it failed
(``"error"``, with the :data:`Stage` that failed and its message); or the run stopped before it
ended (``"cut"``).

**The turn cap** (:func:`turn_cap_reached`): an episode that has played ``max_turns`` turns
without ending is truncated with cause ``"max_turns"``.

**Seeds** (one scheme everywhere):

* episode ``k`` of a run with base seed ``s`` and groups of ``group_size`` is reset with
  :func:`episode_seed` ``= s + k // group_size`` (group members start from the same state);
* anything random *inside* an episode (a model's sampling seed for turn ``t``) uses
  :func:`derive_seed` ``(s, k, t)``, and a stream of runs (a trainer's update ``u``, an actor
  ``a``) gets its base seed from ``derive_seed(s, "stream", u)``;

so the same seeds give the same episodes whatever the concurrency, backend or process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal

from gemgym.errors import ConfigError

__all__ = [
    "Finish",
    "Stage",
    "TruncationCause",
    "check_max_turns",
    "derive_seed",
    "episode_seed",
    "is_success",
    "turn_cap_reached",
]

Finish = Literal["env_end", "truncation", "error", "cut"]
"""How an episode ended (see the module docstring)."""

TruncationCause = Literal["env", "max_turns", "context", "prompt"]
"""Why an episode was truncated: the env's own limit (``truncated=True``), the rollout's turn
cap, the context window (the next turn had no room), or ``"prompt"``: the first prompt alone does
not fit the context, so nothing was sampled."""

Stage = Literal["reset", "model", "step", "tool", "grade", "env"]
"""Where a failed episode failed: the env's reset, the model call, the env's step, a tool call,
the grader, or ``"env"``: the env's host was lost (:class:`~gemgym.errors.EnvLostError`: a
served env's endpoint went down mid-episode, every endpoint of a pool is down)."""

SEED_BITS = 31
"""Derived seeds are below ``2**31``, which every inference server and generator accepts."""


def is_success(info: Mapping[str, Any], terminated: bool, reward: float) -> bool:
    """The success rule: ``info["success"]`` when the env reports it, else terminated with a
    positive reward."""
    if "success" in info:
        return bool(info["success"])
    return bool(terminated) and float(reward) > 0


def check_max_turns(max_turns: int | None, name: str = "max_turns") -> int | None:
    """``max_turns`` if it is ``None`` or a positive int; a :class:`ConfigError` otherwise."""
    if max_turns is not None and (isinstance(max_turns, bool) or int(max_turns) < 1):
        raise ConfigError(f"{name} must be at least 1 (or None for no cap), got {max_turns!r}")
    return None if max_turns is None else int(max_turns)


def turn_cap_reached(turns: int, max_turns: int | None) -> bool:
    """Whether an episode that has played ``turns`` turns has reached the turn cap."""
    return max_turns is not None and turns >= max_turns


def episode_seed(base: int | None, index: int, group_size: int = 1) -> int | None:
    """The reset seed of episode ``index``: ``base + index // group_size`` (``None`` if unseeded)."""
    if base is None:
        return None
    seed: int = int(base) + int(index) // max(1, int(group_size))
    return seed


def derive_seed(base: int | None, *parts: object) -> int | None:
    """A seed derived from ``base`` and ``parts`` (an episode index and a turn, a stream name
    and a number): stable across processes and Python versions, below ``2**31``.
    ``None`` stays ``None`` (unseeded)."""
    if base is None:
        return None
    digest = hashlib.blake2b(repr((int(base), *parts)).encode(), digest_size=8).digest()
    seed: int = int.from_bytes(digest, "big") % (2**SEED_BITS)
    return seed
