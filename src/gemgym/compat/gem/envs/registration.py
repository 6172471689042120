"""``gem.envs.registration``: GEM's ``register``, ``make``, ``make_vec``, ``print_envs``.

Every gemgym env id is there (``ENV_REGISTRY`` lists them) and ids registered through this
module's :func:`register` (GEM's signature: ``register(id, entry_point, **kwargs)``) live beside
them. ``make`` accepts GEM's keyword arguments: a keyword the env does not take is ignored with
one :class:`~gemgym.compat.gem._adapt.GemCompatWarning`, GEM's names are translated (``seed``:
the reasoning-gym ``dataset_seed``, else the first reset's seed; ``dataset_name``: ``dataset``;
``question_key``/``answer_key``: ``columns``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gemgym
from gemgym.compat.gem._adapt import GemEnv, warn_ignored

__all__ = ["ENV_REGISTRY", "EnvSpec", "make", "make_vec", "print_envs", "register"]


@dataclass
class EnvSpec:
    """GEM's spec: an id, an entry point (``"module:Class"`` or a callable) and kwargs."""

    id: str
    entry_point: Callable[..., Any] | str
    kwargs: dict[str, Any] = field(default_factory=dict)


class _Registry(dict[str, EnvSpec]):
    """GEM's ``ENV_REGISTRY``: the ids registered here, then every gemgym id (listed lazily)."""

    _filled = False

    def _fill(self) -> None:
        if self._filled:
            return
        self._filled = True
        for env_id in gemgym.list_envs():
            if not dict.__contains__(self, env_id):
                s = gemgym.spec(env_id)
                entry = s.entry_point if isinstance(s.entry_point, str) else repr(s.entry_point)
                dict.__setitem__(self, env_id, EnvSpec(env_id, entry, dict(s.kwargs)))
                _GEMGYM_IDS.add(env_id)

    def __contains__(self, key: object) -> bool:
        self._fill()
        return dict.__contains__(self, key)

    def __getitem__(self, key: str) -> EnvSpec:
        self._fill()
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        self._fill()
        return dict.get(self, key, default)

    def __iter__(self) -> Iterator[str]:
        self._fill()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._fill()
        return dict.__len__(self)

    def keys(self) -> Any:
        self._fill()
        return dict.keys(self)

    def items(self) -> Any:
        self._fill()
        return dict.items(self)

    def values(self) -> Any:
        self._fill()
        return dict.values(self)


_GEMGYM_IDS: set[str] = set()
ENV_REGISTRY: dict[str, EnvSpec] = _Registry()
"""Every env id ``make`` knows, GEM-registered and gemgym's."""


def register(env_id: str, entry_point: Callable[..., Any] | str, **kwargs: Any) -> None:
    """Register ``env_id`` (GEM's signature); a taken id raises ``ValueError`` as in GEM."""
    if env_id in ENV_REGISTRY:
        raise ValueError(f"Environment {env_id} already registered.")
    dict.__setitem__(ENV_REGISTRY, env_id, EnvSpec(env_id, entry_point, dict(kwargs)))


def print_envs() -> None:
    """Print every id with its entry point and kwargs (GEM's listing)."""
    print("Detailed Registered Environments:")
    for env_id, env_spec in ENV_REGISTRY.items():
        print(f"  - {env_id}:")
        print(f"      Entry Point: {env_spec.entry_point}")
        print(f"      Kwargs: {env_spec.kwargs}")


def accepted_params(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keyword names ``fn`` (a class or function) takes, and whether it takes ``**kwargs``."""
    target: Any = fn.__init__ if inspect.isclass(fn) else fn
    params = inspect.signature(target).parameters
    names = {
        n
        for n, p in params.items()
        if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    return names, any(p.kind is p.VAR_KEYWORD for p in params.values())


def translate_kwargs(
    fn: Callable[..., Any], kwargs: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], int | None]:
    """GEM's keyword arguments for a gemgym env class: ``(gemgym kwargs, first-reset seed)``."""
    names, var_kw = accepted_params(fn)
    out: dict[str, Any] = {}
    columns: dict[str, str] = {}
    seed: int | None = None
    for key, value in kwargs.items():
        if key in names or var_kw:
            out[key] = value
        elif key == "seed":
            if "dataset_seed" in names:  # reasoning-gym: GEM's seed is the dataset's
                out["dataset_seed"] = value
            elif value is not None:
                seed = int(value)
        elif key == "dataset_name" and "dataset" in names:
            if value and "dataset" not in kwargs:
                out["dataset"] = value
        elif key in ("question_key", "answer_key", "test_key") and "columns" in names:
            columns["tests" if key == "test_key" else key.removesuffix("_key")] = value
        else:
            warn_ignored(where, key)
    if columns:
        out["columns"] = {**columns, **dict(out.get("columns") or {})}
    return out, seed


def _load(entry_point: str) -> Callable[..., Any]:
    module_path, _, name = entry_point.partition(":")
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError:
        if module_path != "gem" and not module_path.startswith("gem."):
            raise
        # a GEM path used without the import switch: this layer's module of that name
        module = importlib.import_module(f"gemgym.compat.{module_path}")
    fn: Callable[..., Any] = getattr(module, name)
    return fn


def _no_answer_reward(fn: Callable[..., Any]) -> float | None:
    from gemgym.envs.qa import QaEnv

    return 0.0 if inspect.isclass(fn) and issubclass(fn, QaEnv) else None


def gem_view(
    fn: Callable[..., Any], kwargs: Mapping[str, Any], where: str, build: Callable[..., Any]
) -> GemEnv:
    """The GEM view of the gemgym env ``build(**translated kwargs)`` of class ``fn``.

    Dataset envs get GEM's item order (``seed`` is GEM's shuffle seed, default 0; ``eval=True``
    keeps the dataset's order, as GEM's ``MathEnv``) and QA envs GEM's prompt and reward for a
    reply without an answer; for other envs ``seed`` seeds the first reset.
    """
    from gemgym.compat.gem._adapt import QA_PROMPT, GemOrder
    from gemgym.envs.code import CodeEnv
    from gemgym.envs.dataset import DatasetEnv
    from gemgym.envs.qa import QaEnv

    kw = dict(kwargs)
    is_dataset = (
        inspect.isclass(fn)
        and issubclass(fn, DatasetEnv)
        and "dataset_seed" not in accepted_params(fn)[0]  # reasoning-gym: seed is the data's
    )
    order: GemOrder | None = None
    if is_dataset:
        keep_order = bool(kw.pop("eval", False))
        gem_seed = kw.pop("seed", None)
        if "shuffle" in accepted_params(fn)[0]:
            kw["shuffle"] = False  # the layer picks the items, in GEM's order
        order = GemOrder(
            0 if gem_seed is None else int(gem_seed),
            shuffle=not keep_order,
            follow_seeded=not (inspect.isclass(fn) and issubclass(fn, CodeEnv)),
        )
    gemgym_kwargs, seed = translate_kwargs(fn, kw, where)
    is_qa = inspect.isclass(fn) and issubclass(fn, QaEnv)
    return GemEnv(
        build(**gemgym_kwargs),
        seed=seed,
        no_answer_reward=_no_answer_reward(fn),
        order=order,
        prompt=QA_PROMPT if is_qa else None,
    )


def make(env_id: str, **kwargs: Any) -> Any:
    """Build ``env_id`` with GEM's semantics (see the module docstring)."""
    env_spec = ENV_REGISTRY.get(env_id)
    if env_spec is None:
        from gemgym.errors import close_matches

        hint = close_matches(env_id, list(ENV_REGISTRY), n=1)
        extra = f" Did you mean {hint[0]!r}?" if hint else ""
        raise ValueError(f"Environment {env_id} not found in registry.{extra}")
    if env_id in _GEMGYM_IDS:
        gspec = gemgym.spec(env_id)
        fn = gspec.load()

        def build(**kw: Any) -> Any:
            return gemgym.make(env_id, **kw)

        env = gem_view(fn, {**gspec.kwargs, **kwargs}, f"make({env_id!r})", build)
        env.env_id = env_id
        env.entry_point = gspec.entry_point
        return env
    entry = env_spec.entry_point
    try:
        cls = _load(entry) if isinstance(entry, str) else entry
    except (ModuleNotFoundError, AttributeError) as e:
        raise ImportError(f"Could not import {entry}. Error: {e}") from e
    all_kwargs = {**env_spec.kwargs, **kwargs}
    try:
        names, var_kw = accepted_params(cls)
    except (TypeError, ValueError):  # no signature to read: pass everything
        names, var_kw = set(all_kwargs), True
    if not var_kw:
        for key in [k for k in all_kwargs if k not in names]:
            warn_ignored(f"make({env_id!r})", key, "the env does not take it")
            del all_kwargs[key]
    made = cls(**all_kwargs)
    made.env_id = env_id
    made.entry_point = entry
    return made


def make_vec(
    env_ids: str | Sequence[str],
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    vec_kwargs: Sequence[Mapping[str, Any]] | None = None,
    async_mode: bool = False,
    seed: int = 0,
    **kwargs: Any,
) -> Any:
    """GEM's ``make_vec``: env ``i`` gets ``vec_kwargs[i]``, ``seed=seed + i`` and ``kwargs``.

    ``async_mode=True`` steps the envs in threads (gemgym's ``thread`` backend, as GEM's
    ``AsyncVectorEnv``); the default steps them in a loop.
    """
    from gemgym.compat.gem.vector.async_vector_env import AsyncVectorEnv
    from gemgym.compat.gem.vector.sync_vector_env import SyncVectorEnv

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    envs = []
    for i, env_id in enumerate(ids):
        kw = dict(vec_kwargs[i]) if vec_kwargs is not None else {}
        kw.setdefault("seed", seed + i)
        kw.update(kwargs)
        env = make(env_id, **kw)
        for wrapper in wrappers or ():
            env = wrapper(env)
        envs.append(env)
    cls = AsyncVectorEnv if async_mode else SyncVectorEnv
    return cls(env_ids=ids, envs=envs)
