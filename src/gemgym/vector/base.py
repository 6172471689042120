"""The :class:`VectorEnv` interface and autoreset modes."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gemgym.core import Env
from gemgym.errors import ConfigError

__all__ = ["AutoresetMode", "VectorEnv", "make_vector_env"]

EnvFactory = Callable[[], Env[Any, Any]]


class AutoresetMode(enum.StrEnum):
    """What happens to an env whose episode ended.

    * ``NEXT_STEP``: the next ``step`` resets it (its action is ignored; reward 0, flags false).
    * ``SAME_STEP``: it is reset within the same ``step``; the returned observation and info are
      the reset ones, and the terminal ones are kept in ``info["final_obs"]`` and
      ``info["final_info"]``.
    * ``DISABLED``: nothing happens; call ``reset(options={"reset_mask": mask})``.
    """

    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"

    @classmethod
    def coerce(cls, value: AutoresetMode | str | None) -> AutoresetMode:
        """Accept the enum, its value or name in any case (``"SameStep"`` too)."""
        if value is None:
            return cls.SAME_STEP
        if isinstance(value, cls):
            return value
        key = str(value).replace("-", "_").lower()
        aliases = {"nextstep": "next_step", "samestep": "same_step"}
        key = aliases.get(key, key)
        for mode in cls:
            if mode.value == key:
                return mode
        raise ConfigError(f"unknown autoreset_mode {value!r}; use one of {[m.value for m in cls]}")


VecStep = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]


class VectorEnv:
    """A batch of envs stepped together.

    ``reset(seed=s)`` seeds env ``i`` with ``s + i``. ``step(actions)`` takes one action per env
    (a sequence) or a dict ``{env_index: action}`` that steps only those envs, and returns
    ``(observations, rewards, terminated, truncated, infos)`` for the stepped envs, with numpy
    arrays for the rewards and flags.
    """

    num_envs: int
    env_ids: list[str]
    autoreset_mode: AutoresetMode

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every env (or those selected by ``options={"reset_mask": mask}``)."""
        raise NotImplementedError

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        """Step the envs; see the class docstring."""
        raise NotImplementedError

    def close(self) -> None:
        """Release every env and worker (idempotent)."""

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_vector_env(
    env_ids: Sequence[str],
    env_kwargs: Sequence[Mapping[str, Any]],
    *,
    wrappers: Sequence[Callable[[Env[Any, Any]], Env[Any, Any]]] | None = None,
    backend: str = "sync",
    autoreset_mode: AutoresetMode | str | None = None,
) -> VectorEnv:
    """Build a vector env of the given backend from ids and per-env kwargs."""
    from gemgym.vector.sync import SyncVectorEnv

    backends = {"sync": SyncVectorEnv}
    if backend not in backends:
        raise ConfigError(f"unknown vector backend {backend!r}; available: {sorted(backends)}")
    return backends[backend](env_ids, env_kwargs, wrappers=wrappers, autoreset_mode=autoreset_mode)
