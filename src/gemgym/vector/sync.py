"""A vector env that steps its envs in a loop, in this process."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gemgym.core import Env
from gemgym.errors import VectorEnvError
from gemgym.vector.base import AutoresetMode, VecStep, VectorEnv

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Step envs one after another (fastest for cheap, CPU-bound envs)."""

    def __init__(
        self,
        env_ids: Sequence[str],
        env_kwargs: Sequence[Mapping[str, Any]],
        *,
        wrappers: Sequence[Callable[[Env[Any, Any]], Env[Any, Any]]] | None = None,
        autoreset_mode: AutoresetMode | str | None = None,
    ) -> None:
        from gemgym.registry import make

        self.env_ids = list(env_ids)
        self.num_envs = len(self.env_ids)
        self.autoreset_mode = AutoresetMode.coerce(autoreset_mode)
        self.envs = [
            make(i, wrappers=wrappers, **dict(kw))
            for i, kw in zip(self.env_ids, env_kwargs, strict=True)
        ]
        self._needs_reset = [False] * self.num_envs
        self._closed = False

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        n = self.num_envs
        if seed is None or isinstance(seed, int):
            seeds: list[int | None] = [None if seed is None else seed + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise VectorEnvError(f"got {len(seeds)} seeds for {n} envs")
        mask: Any = None
        if options is None or isinstance(options, Mapping):
            common = dict(options or {})
            mask = common.pop("reset_mask", None)
            per_env: list[dict[str, Any] | None] = [common or None] * n
        else:
            per_env = [None if o is None else dict(o) for o in options]
            if len(per_env) != n:
                raise VectorEnvError(f"got {len(per_env)} option dicts for {n} envs")
        obs: list[Any] = []
        infos: list[dict[str, Any]] = []
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            o, info = env.reset(seed=seeds[i], options=per_env[i])
            self._needs_reset[i] = False
            obs.append(o)
            infos.append(info)
        return obs, infos

    def step(self, actions: Sequence[Any] | Mapping[int, Any]) -> VecStep:
        if isinstance(actions, Mapping):
            items = list(actions.items())
            for i, _ in items:
                if not 0 <= i < self.num_envs:
                    raise VectorEnvError(f"env index {i} out of range 0..{self.num_envs - 1}")
        else:
            if len(actions) != self.num_envs:
                raise VectorEnvError(f"got {len(actions)} actions for {self.num_envs} envs")
            items = list(enumerate(actions))
        k = len(items)
        obs: list[Any] = [None] * k
        rewards = np.zeros(k, dtype=np.float64)
        terminated = np.zeros(k, dtype=bool)
        truncated = np.zeros(k, dtype=bool)
        infos: list[dict[str, Any]] = [{}] * k
        mode = self.autoreset_mode
        for j, (i, action) in enumerate(items):
            env = self.envs[i]
            if mode is AutoresetMode.NEXT_STEP and self._needs_reset[i]:
                obs[j], infos[j] = env.reset()
                self._needs_reset[i] = False
                continue
            o, r, te, tr, info = env.step(action)
            if te or tr:
                if mode is AutoresetMode.SAME_STEP:
                    final_obs, final_info = o, info
                    o, info = env.reset()
                    info = {**info, "final_obs": final_obs, "final_info": final_info}
                elif mode is AutoresetMode.NEXT_STEP:
                    self._needs_reset[i] = True
            obs[j], rewards[j], terminated[j], truncated[j], infos[j] = o, r, te, tr, info
        return obs, rewards, terminated, truncated, infos

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for env in self.envs:
            env.close()
