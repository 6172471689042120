"""``gem.vector.vector_env``: GEM's ``VectorEnv`` and ``AutoresetMode`` over a gemgym vector env.

The envs step in a gemgym :class:`~gemgym.vector.VectorEnv` (``SyncVectorEnv``: a loop;
``AsyncVectorEnv``: the ``thread`` backend, GEM's threads); ``envs`` holds the GEM-level objects
(``make``'s envs with the wrappers applied). ``step`` takes a list or a dict ``{index: action}``
and returns ``(observations, rewards, terminated, truncated, infos)`` as GEM does; an ended env
is reset in the same step (GEM's ``SAME_STEP``), its last observation in ``info["final_obs"]``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from gemgym.compat.gem._adapt import AsGemgym, GemEnv, to_gemgym

__all__ = ["AutoresetMode", "VectorEnv"]


class AutoresetMode(enum.Enum):
    """GEM's autoreset modes."""

    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"


def _builder(env: Any) -> Any:
    inner: Any
    if isinstance(env, GemEnv) and (
        env._gem_no_answer_reward is not None
        or env._gem_order is not None
        or env._gem_prompt is not None
    ):
        inner = AsGemgym(env)  # keep GEM's reward, item order and prompt, which the view applies
    else:
        inner, _, _, _ = to_gemgym(env)

    def build() -> Any:
        return inner

    return build


class VectorEnv:
    """GEM's vector env API over a gemgym vector env of the given backend."""

    backend = "sync"

    def __init__(
        self,
        env_ids: Sequence[str],
        env_fns: Sequence[Any] | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        *,
        envs: Sequence[Any] | None = None,
    ) -> None:
        from gemgym.vector import make_vector_env

        if isinstance(autoreset_mode, str):  # GEM takes the enum or its value
            autoreset_mode = AutoresetMode(autoreset_mode)
        self.env_fns = list(env_fns or ())
        if envs is None:
            envs = [fn() for fn in env_fns or ()]
        self.env_ids = list(env_ids)
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.autoreset_mode = autoreset_mode
        # GEM's make(seed=) seeds each env's first reset
        self._first_seeds: list[int | None] | None = [
            e._gem_seed if isinstance(e, GemEnv) else None for e in self.envs
        ]
        mode = "next_step" if autoreset_mode is AutoresetMode.NEXT_STEP else "same_step"
        self._venv = make_vector_env(
            env_fns=[_builder(e) for e in self.envs],
            backend=self.backend,
            autoreset_mode=mode,
        )

    @property
    def gemgym_vector_env(self) -> Any:
        """The gemgym vector env that steps the envs."""
        return self._venv

    def reset(
        self, seed: int | Sequence[int | None] | None = None, **kwargs: Any
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        options = kwargs.pop("options", None)
        if kwargs:  # GEM's per-env "env{i}_kwargs": gemgym envs take options only
            options = options or [kwargs.get(f"env{i}_kwargs") for i in range(self.num_envs)]
        if (
            seed is None
            and self._first_seeds is not None
            and any(s is not None for s in self._first_seeds)
        ):
            seed = self._first_seeds
        self._first_seeds = None
        if isinstance(seed, int):  # GEM: env i is seeded with seed + i
            seed = [seed + i for i in range(self.num_envs)]
        obs, infos = self._venv.reset(seed=seed, options=options)
        return list(obs), list(infos)

    def step(
        self, actions: Sequence[Any] | Mapping[int, Any]
    ) -> tuple[list[Any], Any, Any, Any, list[dict[str, Any]]]:
        if self._first_seeds is not None:  # GEM's envs start reset: a step may come first
            self.reset()
        obs, rewards, terminated, truncated, infos = self._venv.step(actions)
        return list(obs), rewards, terminated, truncated, list(infos)

    def close(self) -> None:
        self._venv.close()

    def __len__(self) -> int:
        return self.num_envs
