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

import copy
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


_ALIASES: dict[str, Callable[[Any], Any]] = {
    # dataset envs: GEM kept the current item's fields as attributes
    "answer": _item_field("answer"),
    "question": _item_field("question"),
    "first_obs": _item_field("question"),
    "tests": _item_field("tests"),
}

_ITEM_FIELDS = {
    "answer": "answer",
    "question": "question",
    "first_obs": "question",
    "tests": "tests",
}
"""GEM attribute -> item field: writing the attribute changes what the current item is graded by."""

_OWN = frozenset({"env_id", "entry_point", "env"})

_GEMGYM_STATE = "gemgym_state"
"""The key of gemgym's own snapshot in the layer's ``get_state()`` of a dataset env."""


def _fixed_pages(
    start_page_title: str, target_page_title: str, seed: int | None = None
) -> tuple[int | None, dict[str, Any]]:
    return seed, {"start": start_page_title, "target": target_page_title}


_RESETTING: dict[str, Callable[..., tuple[int | None, dict[str, Any]]]] = {
    "_reset_fixed_page": _fixed_pages,
}
"""Env methods that start an episode (GEM's WikiGame test helper): through the layer they are a
``reset(seed, options=...)`` of the whole wrapper chain, so the next step plays that episode;
each maps its arguments to the reset's."""

_WEBSHOP = "gemgym.envs.webshop.env:WebShopEnv"
_RESET_KEYWORDS = {"session": _WEBSHOP, "instruction_text": _WEBSHOP}
"""GEM reset keywords an env takes as reset options: GEM's ``WebshopEnv.reset(seed, session,
instruction_text)`` (an int session is the goal's index, another session a random goal)."""


def _reset_keywords_as_options(
    env: Any, kwargs: dict[str, Any], options: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Move the GEM reset keywords ``env`` takes from ``kwargs`` into ``options``."""
    where = f"{type(env).__module__}:{type(env).__qualname__}"
    for name in [n for n in kwargs if _RESET_KEYWORDS.get(n) == where]:
        value = kwargs.pop(name)
        if value is None or (
            name == "session" and (isinstance(value, bool) or not isinstance(value, int))
        ):
            continue
        options = {**(options or {}), name: value}
    return options


QA_PROMPT = (
    "For any question, always reason through your thought process using:\n"
    "<think> your reasoning here </think>\n"
    "Then, provide your final answer using:\n"
    "<answer> your answer here </answer>\n\n"
    "Question: {question}\n"
)
"""GEM's QA prompt (``gem.envs.qa_env.apply_prompt``), which GEM applies to every question."""


class GemOrder:
    """GEM's item order for a dataset env.

    GEM shuffles the dataset once with its ``seed`` (0 unless given; ``datasets``'
    ``shuffle``, i.e. numpy's ``default_rng(seed).permutation``), walks it in that order on
    unseeded resets and shuffles that order again with ``seed + epoch`` after each pass. ``reset(seed=s)`` draws
    position ``random.Random(s).randint(0, n - 1)`` (GEM seeds the global ``random`` and calls
    ``randint``: the same number, without touching global state); math and QA envs then continue
    from there, the code env's walk is unaffected.
    """

    def __init__(self, seed: int, *, shuffle: bool = True, follow_seeded: bool = True) -> None:
        self.seed = int(seed)
        self.shuffle = shuffle
        self.follow_seeded = follow_seeded
        self.n = -1
        self.idx = 0
        self.epoch = 0
        self.order: list[int] = []

    def _permute(self, seed: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.n))
        import numpy as np

        return [int(i) for i in np.random.default_rng(seed).permutation(self.n)]

    def next_index(self, n: int, seed: int | None) -> int:
        """The dataset index of the next item of a dataset of ``n`` items."""
        import random

        if n != self.n:  # first use, or the dataset was replaced
            self.n, self.idx, self.epoch = n, 0, 0
            self.order = self._permute(self.seed)
        if seed is not None:
            position = random.Random(seed).randint(0, n - 1)
            if self.follow_seeded:
                self.idx = position + 1
            return self.order[position]
        if self.idx >= n:
            self.epoch += 1  # GEM shuffles its already shuffled dataset again
            self.order = [self.order[i] for i in self._permute(self.seed + self.epoch)]
            self.idx = 0
        position = self.idx
        self.idx += 1
        return self.order[position]


def _dataset_env(env: Any) -> Any:
    """The unwrapped gemgym dataset env behind ``env``, or ``None``."""
    from gemgym.envs.dataset import DatasetEnv

    inner = env.unwrapped
    return inner if isinstance(inner, DatasetEnv) else None


def _as_hf_dataset(rows: list[dict[str, Any]]) -> Any:
    """``rows`` as a ``datasets.Dataset`` (GEM's ``env.dataset``) when ``datasets`` is installed
    and the rows fit one schema; else the list."""
    try:
        from datasets import Dataset
    except ImportError:
        return rows
    try:
        return Dataset.from_list(rows)
    except Exception:  # mixed types in a column: the rows as they are
        return rows


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
        order: GemOrder | None = None,
        prompt: str | None = None,
    ) -> None:
        object.__setattr__(self, "_gem_env", env)
        object.__setattr__(self, "_gem_seed", seed)
        object.__setattr__(self, "_gem_no_answer_reward", no_answer_reward)
        object.__setattr__(self, "_gem_base", base)
        object.__setattr__(self, "_gem_started", False)
        object.__setattr__(self, "_gem_last", None)
        object.__setattr__(self, "_gem_order", order)
        object.__setattr__(self, "_gem_prompt", prompt)
        object.__setattr__(self, "_gem_overrides", {})
        object.__setattr__(self, "_gem_dataset", None)

    # -- GEM's API ---------------------------------------------------------------------------
    @property
    def gemgym_env(self) -> gemgym.Env[Any, Any]:
        """The gemgym env behind this GEM view."""
        env: gemgym.Env[Any, Any] = object.__getattribute__(self, "_gem_env")
        return env

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        options = kwargs.pop("options", None)
        idx = kwargs.pop("idx", None)  # GEM's MathEnv.reset(idx=)
        options = _reset_keywords_as_options(self._gem_env.unwrapped, kwargs, options)
        for name in kwargs:
            warn_ignored("reset()", name)
        if seed is None and self._gem_seed is not None:
            seed = self._gem_seed
        object.__setattr__(self, "_gem_seed", None)
        self._gem_overrides.clear()
        order = self._gem_order
        if idx is not None:
            options = {**(options or {}), "index": int(idx)}
            if order is not None:
                order.idx = int(idx) + 1
        elif order is not None and not (options and "index" in options):
            inner = _dataset_env(self._gem_env)
            if inner is not None:
                options = {**(options or {}), "index": order.next_index(len(inner.source), seed)}
        obs, info = self._gem_env.reset(seed=seed, options=options)
        if self._gem_prompt is not None and isinstance(obs, str):
            obs = self._gem_prompt.format(question=obs)
        object.__setattr__(self, "_gem_started", True)
        object.__setattr__(self, "_gem_last", None)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._gem_started:  # GEM's envs reset in __init__: a step may come first
            overrides = dict(self._gem_overrides)  # what the script set before: keep it
            self.reset()
            for name, value in overrides.items():
                self._gem_set_item_field(name, value)
        last = self._gem_last
        if last is not None:
            inner = _dataset_env(self._gem_env)
            if inner is not None and inner.item is not None:
                # GEM's dataset envs grade every step, also after the end (its evaluation
                # loops set env.answer and step again): grade against the current item
                reward, info = inner.grade(action if isinstance(action, str) else "", inner.item)
                if self._gem_no_answer_reward is not None and info.get("format_error"):
                    reward = self._gem_no_answer_reward
                _, _, terminated, truncated, _ = last
                return last[0], reward, terminated, truncated, info
            # a game: the end again, no reward
            obs, _, terminated, truncated, info = last
            return obs, 0.0, terminated, truncated, {**info, "episode_over": True}
        obs, reward, terminated, truncated, info = self._gem_env.step(action)
        if self._gem_no_answer_reward is not None and info.get("format_error"):
            reward = self._gem_no_answer_reward
        if terminated or truncated:
            object.__setattr__(self, "_gem_last", (obs, reward, terminated, truncated, info))
        return obs, reward, terminated, truncated, info

    def _gem_set_item_field(self, name: str, value: Any) -> bool:
        """Set GEM attribute ``name`` on the current item of a dataset env; whether it is one."""
        field = _ITEM_FIELDS.get(name)
        inner = _dataset_env(self._gem_env) if field is not None else None
        if field is None or inner is None:
            return False
        self._gem_overrides[name] = value
        if inner.item is not None:
            inner.item = {**inner.item, field: value}  # the shared dataset row stays as it was
        return True

    def _gem_get_dataset(self) -> Any:
        """GEM's ``env.dataset``: the items (GEM's QA prompt applied) as a ``datasets.Dataset``."""
        inner = _dataset_env(self._gem_env)
        if inner is None:
            raise AttributeError("dataset")
        cached = self._gem_dataset
        if cached is not None and cached[0] is inner.source:
            return cached[1]
        rows = [dict(r) for r in inner.source.items]
        prompt = self._gem_prompt
        if prompt is not None:
            for row in rows:
                question = str(row["question"])
                for key, value in list(row.items()):
                    if value == question:  # the question under each of its column names
                        row[key] = prompt.format(question=question)
        dataset = _as_hf_dataset(rows)
        object.__setattr__(self, "_gem_dataset", (inner.source, dataset))
        return dataset

    def _gem_set_dataset(self, value: Any) -> bool:
        inner = _dataset_env(self._gem_env)
        if inner is None:
            return False
        from gemgym.envs.dataset import load_items

        rows = value.to_list() if hasattr(value, "to_list") else list(value)
        inner.source = load_items(rows, spec=inner.dataset_spec, required=inner.required_fields)
        object.__setattr__(self, "_gem_dataset", None)
        return True

    def sample_random_action(self) -> Any:
        return self._gem_env.sample_random_action()

    def get_state(self) -> Any:
        """GEM's ``get_state()``: on a dataset env the current item under GEM's names
        (``first_obs`` and ``answer``, or ``tests`` for code) with gemgym's snapshot alongside;
        on other envs gemgym's snapshot."""
        env = self._gem_env
        inner = _dataset_env(env)
        if inner is None or not isinstance(inner.item, Mapping):
            return env.get_state()
        question = str(inner.item.get("question", ""))
        prompt = self._gem_prompt
        state: dict[str, Any] = {
            "first_obs": prompt.format(question=question) if prompt is not None else question
        }
        for field in ("answer", "tests"):
            if field in inner.item:
                state[field] = copy.deepcopy(inner.item[field])
        state[_GEMGYM_STATE] = env.get_state()
        return state

    def set_state(self, state: Any) -> None:
        """GEM's ``set_state(state)``: restores a :meth:`get_state` snapshot; on a dataset env a
        dict of GEM's names (``{"first_obs": ..., "answer": ...}``) sets the current item, as
        GEM's ``set_state`` does."""
        env = self._gem_env
        inner = _dataset_env(env)
        if inner is None or not isinstance(state, Mapping):
            env.set_state(state)
            return
        if _GEMGYM_STATE in state:
            env.set_state(state[_GEMGYM_STATE])
        for name in ("first_obs", "answer", "tests"):
            if name in state:
                self._gem_set_item_field(name, copy.deepcopy(state[name]))

    def spawn(self, same_state: bool = False, **kwargs: Any) -> GemEnv:
        for name in kwargs:
            warn_ignored("spawn()", name)
        order = self._gem_order
        child = GemEnv(
            self._gem_env.spawn(same_state=same_state),
            no_answer_reward=self._gem_no_answer_reward,
            order=copy.deepcopy(order) if same_state else None,
            prompt=self._gem_prompt,
        )
        if same_state:  # GEM's spawn(same_state=True) is on the same item, ready to step
            object.__setattr__(child, "_gem_started", self._gem_started)
            object.__setattr__(child, "_gem_last", copy.deepcopy(self._gem_last))
            object.__setattr__(child, "_gem_overrides", dict(self._gem_overrides))
        elif order is not None:
            child_order = GemOrder(order.seed, shuffle=order.shuffle)
            child_order.follow_seeded = order.follow_seeded
            object.__setattr__(child, "_gem_order", child_order)
        return child

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
        to_reset = _RESETTING.get(name)
        if to_reset is not None and hasattr(env.unwrapped, name):

            def start_episode(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
                seed, options = to_reset(*args, **kwargs)
                return self.reset(seed, options=options)

            return start_episode
        if name == "dataset":
            try:
                return self._gem_get_dataset()
            except AttributeError:
                pass
        order = object.__getattribute__(self, "_gem_order")
        if name == "seed" and order is not None:
            return order.seed  # GEM's dataset envs keep make(seed=) as env.seed
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
        if self._gem_set_item_field(name, value):
            return
        if name == "dataset" and self._gem_set_dataset(value):
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

    ``AdaptedEnv(*args, **kwargs)`` takes GEM's arguments: positional ones in the order of GEM's
    constructor (:attr:`gem_params`), keywords translated and, where unknown, ignored with a
    warning, as :func:`gemgym.compat.gem.envs.registration.make` does.
    """

    gemgym_entry_point: str = ""
    gem_params: tuple[str, ...] = ()
    """GEM's constructor parameters in order (what positional arguments mean)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from gemgym.compat.gem.envs.registration import gem_view
        from gemgym.env_spec import EnvSpec

        name = type(self).__name__
        if len(args) > len(self.gem_params):
            raise TypeError(
                f"{name}() takes at most {len(self.gem_params)} positional arguments "
                f"({', '.join(self.gem_params)}), got {len(args)}"
            )
        for param, value in zip(self.gem_params, args, strict=False):
            if param in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {param!r}")
            kwargs[param] = value
        fn = EnvSpec(id="gem:Adapted", entry_point=self.gemgym_entry_point).load()
        view = gem_view(fn, kwargs, f"{name}()", fn)
        super().__init__(
            view.gemgym_env,
            seed=view._gem_seed,
            no_answer_reward=view._gem_no_answer_reward,
            order=view._gem_order,
            prompt=view._gem_prompt,
        )
