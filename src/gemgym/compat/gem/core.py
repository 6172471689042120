"""``gem.core``: GEM's ``Env`` base class and ``EnvWrapper``, for GEM-style envs and wrappers.

An env written for GEM subclasses :class:`Env` and implements ``reset(self, seed=None)`` and
``step(self, action)``. As in GEM, ``Env.reset(seed)`` seeds Python's and numpy's global random
generators (GEM envs draw from ``random``); gemgym's own envs never touch global state.
:class:`EnvWrapper` forwards every attribute it lacks to the env it wraps (GEM copied them once,
at construction, so its copies went stale).
"""

from __future__ import annotations

import abc
import random
from typing import Any

import numpy as np

__all__ = ["Env", "EnvWrapper"]


class Env(abc.ABC):
    """GEM's env interface: ``reset(seed=None) -> (obs, info)``, ``step(action)`` -> 5-tuple."""

    @abc.abstractmethod
    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply ``action``; ``(observation, reward, terminated, truncated, info)``."""

    def reset(self, seed: int | None = None) -> Any:
        """Start an episode; GEM's base seeds the global generators when ``seed`` is given."""
        if seed is not None:
            random.seed(seed)
            np.random.seed(seed % 2**32)
        return None

    def sample_random_action(self) -> Any:
        raise NotImplementedError

    def spawn(self, same_state: bool = False, **kwargs: Any) -> Env:
        raise NotImplementedError

    def close(self) -> None:
        return None

    @property
    def unwrapped(self) -> Env:
        return self


class EnvWrapper(Env):
    """GEM's wrapper base: ``self.env`` is the wrapped env; other attributes are forwarded."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        result: tuple[Any, dict[str, Any]] = self.env.reset(seed=seed, **kwargs)
        return result

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        result: tuple[Any, float, bool, bool, dict[str, Any]] = self.env.step(action)
        return result

    def sample_random_action(self) -> Any:
        return self.env.sample_random_action()

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped
