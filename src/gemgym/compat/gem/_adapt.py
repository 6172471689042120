"""The two adapters of the GEM layer and its one leniency rule.

* :class:`GemEnv` shows a gemgym env (with its wrappers) through GEM's API: ``reset(seed)``
  positional, GEM's attribute names (``env.answer``, ``env.max_turns``, ``env.env_id``, ...)
  read from the env itself, steps after the end tolerated, GEM's reward where gemgym's differs.
* :class:`AsGemgym` shows a GEM-style object (a custom ``gem.core.Env`` subclass, a GEM
  wrapper) as a :class:`gemgym.Env`, so gemgym's wrappers and vector envs run it.
* :func:`warn_ignored`: GEM accepts and ignores unknown keyword arguments; the layer does too,
  with one :class:`GemCompatWarning` per (place, keyword).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any, ClassVar

import gemgym
from gemgym.compat.gem.core import Env

__all__ = ["AsGemgym", "GemCompatWarning", "GemEnv", "to_gemgym", "warn_ignored", "wrap_gemgym"]


class GemCompatWarning(UserWarning):
    """A GEM argument the compatibility layer accepts but does not use."""


_HERE = os.path.dirname(os.path.abspath(__file__))
_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def warn_ignored(where: str, name: str, why: str = "") -> None:
    """Warn once per process that keyword ``name`` given to ``where`` is ignored (as GEM does)."""
    with _WARNED_LOCK:
        if (where, name) in _WARNED:
            return
        _WARNED.add((where, name))
    reason = f" ({why})" if why else ""
    level = 2
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_HERE):
        frame, level = frame.f_back, level + 1  # point at the caller of the layer
    warnings.warn(
        f"{where}: ignoring the GEM keyword argument {name!r}{reason}; gemgym's own API "
        "would reject it",
        GemCompatWarning,
        stacklevel=level,
    )


def _item_field(field: str) -> Callable[[Any], Any]:
    def get(env: Any) -> Any:
        item = getattr(env, "item", None)
        if isinstance(item, Mapping) and field in item:
            return item[field]
        raise AttributeError(field)

    return get


def _dataset(env: Any) -> Any:
    source = getattr(env, "source", None)
    if source is None:
        raise AttributeError("dataset")
    return getattr(source, "items", source)


_ALIASES: dict[str, Callable[[Any], Any]] = {
    # dataset envs: GEM kept the current item's fields as attributes
    "answer": _item_field("answer"),
    "question": _item_field("question"),
    "tests": _item_field("tests"),
    "dataset": _dataset,
}

_OWN = frozenset({"env_id", "entry_point", "env"})


class GemEnv(Env):
    """A gemgym env seen through GEM's API (what the layer's ``make`` returns).

    Args:
        env: the gemgym env (possibly wrapped).
        seed: GEM's ``make(..., seed=)``: the seed of the first ``reset`` that gives none.
        no_answer_reward: GEM's reward for a reply the env found no answer in (replaces
            gemgym's when ``info["format_error"]`` is set), or ``None`` to keep gemgym's.
        base: the :class:`GemEnv` of the unwrapped env (for wrappers built by the layer).
    """

    def __init__(
        self,
        env: gemgym.Env[Any, Any],
        *,
        seed: int | None = None,
        no_answer_reward: float | None = None,
        base: GemEnv | None = None,
    ) -> None:
        object.__setattr__(self, "_gem_env", env)
        object.__setattr__(self, "_gem_seed", seed)
        object.__setattr__(self, "_gem_no_answer_reward", no_answer_reward)
        object.__setattr__(self, "_gem_base", base)
        object.__setattr__(self, "_gem_started", False)
        object.__setattr__(self, "_gem_last", None)

    # -- GEM's API ---------------------------------------------------------------------------
    @property
    def gemgym_env(self) -> gemgym.Env[Any, Any]:
        """The gemgym env behind this GEM view."""
        env: gemgym.Env[Any, Any] = object.__getattribute__(self, "_gem_env")
        return env

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        options = kwargs.pop("options", None)
        for name in kwargs:
            warn_ignored("reset()", name)
        if seed is None and self._gem_seed is not None:
            seed = self._gem_seed
        object.__setattr__(self, "_gem_seed", None)
        obs, info = self._gem_env.reset(seed=seed, options=options)
        object.__setattr__(self, "_gem_started", True)
        object.__setattr__(self, "_gem_last", None)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._gem_started:  # GEM's envs reset in __init__: a step may come first
            self.reset()
        last = self._gem_last
        if last is not None:  # GEM tolerates steps after the end: the end again, no reward
            obs, _, terminated, truncated, info = last
            return obs, 0.0, terminated, truncated, {**info, "episode_over": True}
        obs, reward, terminated, truncated, info = self._gem_env.step(action)
        if self._gem_no_answer_reward is not None and info.get("format_error"):
            reward = self._gem_no_answer_reward
        if terminated or truncated:
            object.__setattr__(self, "_gem_last", (obs, reward, terminated, truncated, info))
        return obs, reward, terminated, truncated, info

    def sample_random_action(self) -> Any:
        return self._gem_env.sample_random_action()

    def spawn(self, same_state: bool = False, **kwargs: Any) -> GemEnv:
        for name in kwargs:
            warn_ignored("spawn()", name)
        return GemEnv(
            self._gem_env.spawn(same_state=same_state),
            no_answer_reward=self._gem_no_answer_reward,
        )

    def close(self) -> None:
        self._gem_env.close()

    @property
    def unwrapped(self) -> Any:
        base = self._gem_base
        return self if base is None else base.unwrapped

    # -- attributes: the env's own, under GEM's names ----------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith(("__", "_gem_")):
            raise AttributeError(name)
        env = object.__getattribute__(self, "_gem_env")
        alias = _ALIASES.get(name)
        if alias is not None:
            try:
                return alias(env.unwrapped)
            except AttributeError:
                pass
        try:
            return env.get_wrapper_attr(name)
        except AttributeError:
            pass
        try:
            return getattr(env.unwrapped, name)
        except AttributeError:
            raise AttributeError(
                f"{type(env.unwrapped).__name__} (through the GEM layer) has no attribute {name!r}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            name.startswith("_gem_")
            or name in _OWN
            or isinstance(getattr(type(self), name, None), property)
        ):
            object.__setattr__(self, name, value)
            return
        inner = self._gem_env.unwrapped
        if hasattr(inner, name):
            setattr(inner, name, value)  # GEM code sets the env's state directly
        else:
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"<GEM view of {self._gem_env!r}>"


class AsGemgym(gemgym.Env[Any, Any]):
    """A GEM-style env or wrapper (``reset(seed=None)``, no ``options``) as a gemgym env."""

    metadata: ClassVar[Mapping[str, Any]] = {"multi_turn": True}

    def __init__(self, gem_env: Any) -> None:
        self.gem = gem_env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if isinstance(self.gem, GemEnv):  # a GEM view of a gemgym env takes options
            obs, info = self.gem.reset(seed=seed, options=options)
            return obs, dict(info)
        if options:
            warn_ignored(f"{type(self.gem).__name__}.reset()", "options", "a GEM env takes none")
        result = self.gem.reset(seed=seed)
        if isinstance(result, tuple) and len(result) == 2:
            obs, info = result
        else:  # some GEM envs return only the observation
            obs, info = result, {}
        return obs, dict(info or {})

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.gem.step(action)
        return obs, float(reward), bool(terminated), bool(truncated), dict(info or {})

    def sample_random_action(self) -> Any:
        return self.gem.sample_random_action()

    def close(self) -> None:
        close = getattr(self.gem, "close", None)
        if callable(close):
            close()
        super().close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "gem":
            raise AttributeError(name)
        return getattr(self.gem, name)


def to_gemgym(env: Any) -> tuple[gemgym.Env[Any, Any], int | None, float | None, GemEnv | None]:
    """The gemgym env behind a GEM-level object: ``(env, pending seed, no-answer reward, base)``."""
    if isinstance(env, GemEnv):
        base = env._gem_base or env
        return env.gemgym_env, env._gem_seed, env._gem_no_answer_reward, base
    if isinstance(env, gemgym.Env):
        return env, None, None, None
    return AsGemgym(env), None, None, None


def wrap_gemgym(
    env: Any, factory: Callable[[gemgym.Env[Any, Any]], gemgym.Env[Any, Any]]
) -> GemEnv:
    """Apply a gemgym wrapper factory to a GEM-level object; GEM's ``wrapper.env`` is ``env``."""
    inner, seed, no_answer, base = to_gemgym(env)
    wrapped = GemEnv(factory(inner), seed=seed, no_answer_reward=no_answer, base=base)
    wrapped.env = env
    return wrapped


class AdaptedEnv(GemEnv):
    """A GEM env class backed by a gemgym env class (:attr:`gemgym_entry_point`).

    ``AdaptedEnv(**kwargs)`` takes GEM's keyword arguments (translated and, where unknown,
    ignored with a warning, as :func:`gemgym.compat.gem.envs.registration.make` does).
    """

    gemgym_entry_point: str = ""
    no_answer_reward: float | None = None

    def __init__(self, **kwargs: Any) -> None:
        from gemgym.compat.gem.envs.registration import translate_kwargs
        from gemgym.env_spec import EnvSpec

        fn = EnvSpec(id="gem:Adapted", entry_point=self.gemgym_entry_point).load()
        gemgym_kwargs, seed = translate_kwargs(fn, kwargs, f"{type(self).__name__}()")
        super().__init__(
            fn(**gemgym_kwargs), seed=seed, no_answer_reward=type(self).no_answer_reward
        )
