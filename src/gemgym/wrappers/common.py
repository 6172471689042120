"""Episode-level wrappers: :class:`TimeLimit`, :class:`OrderEnforcing`, :class:`EpisodeStatistics`."""

from __future__ import annotations

import time
from typing import Any, cast

from gemgym.core import ActT, Env, ObsT, StepResult, Wrapper
from gemgym.episodes.outcomes import is_success
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.turns import TurnCounter, check_turn_limit

_NEEDS_RESET = "call reset() before step(): the env has not been reset or its episode has ended"

__all__ = ["EpisodeStatistics", "OrderEnforcing", "TimeLimit"]


class TimeLimit(Wrapper[ObsT, ActT, ObsT, ActT]):
    """Truncate episodes after ``max_episode_steps`` steps.

    The step that reaches the limit returns ``truncated=True`` unless the env terminated on that
    same step (then ``terminated=True`` alone: a terminal state wins, so the two flags are never
    both set). It marks ``info["turn_limit"]``, as every turn limit in gemgym does
    (:class:`~gemgym.turns.TurnCounter`), and Gymnasium's ``info["TimeLimit.truncated"]``.

    >>> import gemgym
    >>> env = gemgym.make("game:GuessTheNumber-v0-hard", max_episode_steps=2)
    >>> _ = env.reset(seed=0)
    >>> _ = env.step(r"\\boxed{1}")
    >>> env.step(r"\\boxed{2}")[3]
    True
    """

    def __init__(self, env: Env[ObsT, ActT], max_episode_steps: int) -> None:
        super().__init__(env)
        if max_episode_steps is None:
            raise ConfigError("max_episode_steps must be a positive int, got None")
        self.turns = TurnCounter(check_turn_limit(max_episode_steps, "max_episode_steps"))

    @property
    def max_episode_steps(self) -> int:
        """The limit (Gymnasium's name)."""
        return cast(int, self.turns.limit)

    @property
    def elapsed_steps(self) -> int:
        """The steps played in this episode (Gymnasium's name)."""
        return self.turns.count

    def after_reset(self, obs: ObsT, info: dict[str, Any]) -> tuple[ObsT, dict[str, Any]]:
        self.turns.restart()
        return obs, info

    def after_step(self, action: ActT, result: StepResult[ObsT]) -> StepResult[ObsT]:
        if not self.turns.tick() or result[2] or result[3]:
            return result
        result = self.turns.cut(result)
        result[4]["TimeLimit.truncated"] = True
        return result


class OrderEnforcing(Wrapper[ObsT, ActT, ObsT, ActT]):
    """Raise :class:`~gemgym.errors.ResetNeeded` on ``step`` before ``reset`` or after the end.

    :func:`gemgym.make` applies it by default (``order_enforce=False`` in the spec turns it off).
    """

    def __init__(self, env: Env[ObsT, ActT]) -> None:
        super().__init__(env)
        self._needs_reset = True

    # The layer every made env has: step and astep are written out rather than composed from
    # the hooks, to keep it to one Python call per step.
    def step(self, action: ActT) -> StepResult[ObsT]:
        if self._needs_reset:
            raise ResetNeeded(_NEEDS_RESET)
        result = self.env.step(action)
        if result[2] or result[3]:
            self._needs_reset = True
        return result

    async def astep(self, action: ActT) -> StepResult[ObsT]:
        if self._needs_reset:
            raise ResetNeeded(_NEEDS_RESET)
        result = await self.env.astep(action)
        if result[2] or result[3]:
            self._needs_reset = True
        return result

    def after_reset(self, obs: ObsT, info: dict[str, Any]) -> tuple[ObsT, dict[str, Any]]:
        self._needs_reset = False
        return obs, info

    @property
    def has_reset(self) -> bool:
        """Whether ``reset`` was called since the last episode ended."""
        return not self._needs_reset

    def require_reset(self) -> None:
        """Make ``step`` raise until the next ``reset``: for a caller that stepped the env below
        this layer, saw its episode end and could not reset it."""
        self._needs_reset = True


class EpisodeStatistics(Wrapper[ObsT, ActT, ObsT, ActT]):
    """Add ``info["episode"]`` when an episode ends: return, length, success and wall time.

    ``info["episode"] = {"return": float, "length": int, "success": bool, "time": float}``
    (``time``: wall seconds since ``reset`` returned).
    Success is the env's ``info["success"]`` on the last step when it reports one, else whether
    the episode terminated with a positive reward. Running totals are in :attr:`episode_returns`.
    """

    def __init__(self, env: Env[ObsT, ActT]) -> None:
        super().__init__(env)
        self.episode_return = 0.0
        self.episode_length = 0
        self._start = time.perf_counter()
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.episode_successes: list[bool] = []

    def after_reset(self, obs: ObsT, info: dict[str, Any]) -> tuple[ObsT, dict[str, Any]]:
        self.episode_return = 0.0
        self.episode_length = 0
        self._start = time.perf_counter()
        return obs, info

    def after_step(self, action: ActT, result: StepResult[ObsT]) -> StepResult[ObsT]:
        obs, reward, terminated, truncated, info = result
        self.episode_return += float(reward)
        self.episode_length += 1
        if terminated or truncated:
            success = is_success(info, terminated, reward)
            info["episode"] = {
                "return": self.episode_return,
                "length": self.episode_length,
                "success": success,
                "time": time.perf_counter() - self._start,
            }
            self.episode_returns.append(self.episode_return)
            self.episode_lengths.append(self.episode_length)
            self.episode_successes.append(success)
        return obs, reward, terminated, truncated, info
