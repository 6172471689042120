"""The env registry: :func:`register`, :func:`make`, :func:`spec`, :func:`list_envs`.

Env ids follow GEM's grammar ``[namespace:]Name[-vN][-variant]``, for example
``game:GuessTheNumber-v0-hard``, ``math:GSM8K`` or ``rg:basic_arithmetic``.

Registration is by string entry point (``"package.module:Class"``), so listing envs imports no
heavy dependency. Built-in envs register themselves beside their code: the first registry lookup
imports every module of :mod:`gemgym.envs` (they keep heavy imports inside functions). Third-party
packages register through the ``gemgym.envs`` entry-point group: each entry point names a module to
import or a function to call, which calls :func:`register`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import inspect
import pkgutil
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gemgym.core import Env, Wrapper
from gemgym.env_spec import EnvSpec, parse_env_id
from gemgym.errors import (
    ConfigError,
    DuplicateEnvError,
    EnvNotFoundError,
    InvalidEnvIdError,
    RegistryError,
    UnknownParameterError,
    close_matches,
)

__all__ = [
    "EnvSpec",
    "WrapperFactory",
    "list_envs",
    "make",
    "parse_env_id",
    "print_envs",
    "register",
    "registry",
    "spec",
]

EnvFactory = Callable[..., Env[Any, Any]]
WrapperFactory = Callable[[Env[Any, Any]], Env[Any, Any]]


class Registry:
    """A mapping of env ids to :class:`EnvSpec`; :data:`registry` is the global one."""

    def __init__(self) -> None:
        self._specs: dict[str, EnvSpec] = {}
        self._lock = threading.RLock()
        self._builtins_loaded = False
        self._loading = False
        self.import_errors: dict[str, str] = {}
        """Env modules that failed to import during discovery, with the error (their ids are
        missing; :meth:`spec` mentions them)."""
        self.unavailable: dict[str, str] = {}
        """Ids a family knows but does not register, with the reason (TextArena games whose
        module cannot run here: ``ta:Wordle-v0`` needs NLTK data); :meth:`spec` and ``gemgym
        list`` say why such an id is missing."""

    # -- discovery -------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._builtins_loaded:  # set last, under the lock: once true, every env is there
            return
        # Another thread that is loading holds the lock: wait for it rather than look up a half
        # filled registry. ``_loading`` is only seen true here by the loading thread itself (an
        # env module that looks an id up while it is imported); the RLock lets it through.
        with self._lock:
            if self._builtins_loaded or self._loading:
                return
            self._loading = True
            try:
                import gemgym.envs as envs_pkg

                for mod in sorted(
                    pkgutil.walk_packages(envs_pkg.__path__, prefix="gemgym.envs."),
                    key=lambda m: m.name,
                ):
                    leaf = mod.name.rsplit(".", 1)[-1]
                    if leaf.startswith("_"):
                        continue
                    try:
                        importlib.import_module(mod.name)
                    except Exception as e:  # one broken module must not hide every other env
                        self.import_errors[mod.name] = f"{type(e).__name__}: {e}"
                self._load_plugins()
                self._builtins_loaded = True
            finally:
                self._loading = False

    def _load_plugins(self) -> None:
        from importlib.metadata import entry_points

        for ep in entry_points(group="gemgym.envs"):
            try:
                loaded = ep.load()
                if callable(loaded) and not inspect.ismodule(loaded):
                    loaded()
            except Exception as e:
                self.import_errors[f"entry point {ep.name}"] = f"{type(e).__name__}: {e}"

    # -- mutation ----------------------------------------------------------------------------
    def register(self, env_spec: EnvSpec, *, override: bool = False) -> None:
        """Add a spec; a duplicate id is an error unless ``override``."""
        parse_env_id(env_spec.id)
        with self._lock:
            if env_spec.id in self._specs and not override:
                raise DuplicateEnvError(
                    f"env id {env_spec.id!r} is already registered "
                    f"(entry point {self._specs[env_spec.id].entry_point!r}); "
                    "pick another id or pass override=True"
                )
            self._specs[env_spec.id] = env_spec

    def unregister(self, env_id: str) -> None:
        """Remove a spec (mostly for tests)."""
        with self._lock:
            self._specs.pop(env_id, None)

    # -- lookup --------------------------------------------------------------------------------
    def spec(self, env_id: str) -> EnvSpec:
        """The spec for ``env_id``; unknown ids get close-match suggestions."""
        if not isinstance(env_id, str):
            raise InvalidEnvIdError(f"env ids are strings, got {type(env_id).__name__}")
        found = self._specs.get(env_id)
        if found is None:
            self._ensure_loaded()
            found = self._specs.get(env_id)
        if found is None:
            parse_env_id(env_id)
            suggestions = close_matches(env_id, self._specs)
            hint = (
                f" Did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
            )
            why = self.unavailable.get(env_id)
            if why is not None:
                hint = f" It cannot be registered here: {why}.{hint}"
            broken = "".join(f"\n  {m}: {err}" for m, err in self.import_errors.items())
            if broken:
                broken = f"\nThese env modules failed to import:{broken}"
            raise EnvNotFoundError(
                f"no env registered as {env_id!r}.{hint} "
                f"Run `gemgym list` or gemgym.list_envs() to see the available ids.{broken}"
            )
        return found

    def ids(self) -> list[str]:
        """All registered ids, sorted."""
        self._ensure_loaded()
        return sorted(self._specs)

    def __contains__(self, env_id: object) -> bool:
        self._ensure_loaded()
        return env_id in self._specs

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._specs)


registry = Registry()
"""The global registry used by :func:`register`, :func:`make` and friends."""


def register(
    id: str,
    entry_point: str | EnvFactory,
    *,
    kwargs: Mapping[str, Any] | None = None,
    max_episode_steps: int | None = None,
    order_enforce: bool = True,
    description: str = "",
    extra: str | None = None,
    override: bool = False,
) -> EnvSpec:
    """Register an env under ``id``.

    Args:
        id: ``[namespace:]Name[-vN][-variant]``.
        entry_point: ``"package.module:Class"`` (imported on first :func:`make`) or a callable.
        kwargs: default keyword arguments passed to the entry point.
        max_episode_steps: wrap in :class:`~gemgym.wrappers.TimeLimit` with this many steps.
        order_enforce: wrap in :class:`~gemgym.wrappers.OrderEnforcing` (step before reset errors).
        description: one line for listings.
        extra: the ``gemgym[extra]`` the env needs, named in errors when it is missing.
        override: replace an existing registration instead of raising.

    Raises:
        DuplicateEnvError: ``id`` is taken and ``override`` is false.
        InvalidEnvIdError: ``id`` does not follow the grammar.
    """
    if not (isinstance(entry_point, str) and ":" in entry_point) and not callable(entry_point):
        raise RegistryError(
            f"entry_point for {id!r} must be 'package.module:Callable' or a callable, "
            f"got {entry_point!r}"
        )
    if max_episode_steps is not None and max_episode_steps <= 0:
        raise ConfigError(f"max_episode_steps must be positive, got {max_episode_steps}")
    env_spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=dict(kwargs or {}),
        max_episode_steps=max_episode_steps,
        order_enforce=order_enforce,
        description=description,
        extra=extra,
    )
    registry.register(env_spec, override=override)
    return env_spec


def spec(env_id: str) -> EnvSpec:
    """Return the :class:`EnvSpec` registered as ``env_id``."""
    return registry.spec(env_id)


def _accepted_params(fn: Callable[..., Any]) -> tuple[list[str], bool]:
    target: Any = fn.__init__ if inspect.isclass(fn) else fn
    params = inspect.signature(target).parameters
    names = [
        n
        for n, p in params.items()
        if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return names, has_var_kw


def check_kwargs(fn: Callable[..., Any], kwargs: Mapping[str, Any], what: str) -> None:
    """Raise :class:`UnknownParameterError` for keywords ``fn`` does not accept."""
    try:
        names, has_var_kw = _accepted_params(fn)
    except (TypeError, ValueError):  # builtins without signatures
        return
    if has_var_kw:
        return
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        bad = unknown[0]
        sugg = close_matches(bad, names, n=1)
        hint = f" Did you mean {sugg[0]!r}?" if sugg else ""
        raise UnknownParameterError(
            f"{what} got an unknown parameter {bad!r}.{hint} "
            f"Valid parameters: {', '.join(names) or '(none)'}"
        )


def make(
    env_id: str | EnvSpec,
    *,
    max_episode_steps: int | None = None,
    wrappers: Sequence[WrapperFactory] | None = None,
    **kwargs: Any,
) -> Env[Any, Any]:
    """Build the env registered as ``env_id``.

    Args:
        env_id: a registered id (or an :class:`EnvSpec`).
        max_episode_steps: override the spec's step limit (``-1`` disables the TimeLimit).
        wrappers: callables applied in order to the env (e.g. ``[ConcatHistory]`` or
            ``[lambda e: ToolEnvWrapper(e, [PythonTool()])]``); they wrap outside the default stack.
        **kwargs: keyword arguments for the env, overriding the spec's defaults.

    Raises:
        EnvNotFoundError: unknown id (the message suggests close matches).
        UnknownParameterError: a keyword the env does not take (the message lists the valid ones).
        DependencyNotInstalled: the env needs an extra that is not installed.

    >>> import gemgym
    >>> env = gemgym.make("game:GuessTheNumber-v0-easy")
    >>> obs, info = env.reset(seed=0)
    """
    from gemgym.wrappers.common import OrderEnforcing, TimeLimit

    env_spec = env_id if isinstance(env_id, EnvSpec) else registry.spec(env_id)
    fn = env_spec.load()
    all_kwargs = {**env_spec.kwargs, **kwargs}
    check_kwargs(fn, all_kwargs, f"env {env_spec.id!r}")
    env: Env[Any, Any] = fn(**all_kwargs)
    if not isinstance(env, Env):
        raise RegistryError(
            f"entry point of {env_spec.id!r} returned {type(env).__name__}, not a gemgym.Env"
        )
    steps = env_spec.max_episode_steps if max_episode_steps is None else max_episode_steps
    made_spec = dataclasses.replace(
        env_spec, kwargs=all_kwargs, max_episode_steps=steps if steps and steps > 0 else None
    )
    env.unwrapped.spec = made_spec
    if env_spec.order_enforce:
        env = OrderEnforcing(env)
    if steps is not None and steps > 0:
        env = TimeLimit(env, steps)
    for w in wrappers or ():
        env = w(env)
        if not isinstance(env, Env):
            raise TypeError(f"wrapper factory {w!r} returned {type(env).__name__}, not an Env")
    if isinstance(env, Wrapper):
        env.spec = made_spec
    return env


def list_envs(pattern: str | None = None) -> list[str]:
    """Registered ids, sorted; ``pattern`` is a glob (``"game:*"``) or a substring."""
    ids = registry.ids()
    return match_ids(ids, pattern) if pattern else ids


def match_ids(ids: Sequence[str], pattern: str) -> list[str]:
    """The ``ids`` that ``pattern`` matches, as :func:`list_envs` matches: a glob when it has
    ``*?[``, else a case-insensitive substring."""
    if any(c in pattern for c in "*?["):
        return [i for i in ids if fnmatch.fnmatchcase(i, pattern)]
    low = pattern.lower()
    return [i for i in ids if low in i.lower()]


def print_envs(pattern: str | None = None) -> None:
    """Print a table of registered envs (id, description, requirement); piped, lines are as long
    as the table (no cut at 80 columns) unless ``COLUMNS`` sets a width."""
    from rich.table import Table
    from rich.text import Text

    from gemgym._console import stdout_console

    table = Table("id", "description", "requires")
    for env_id in list_envs(pattern):
        s = registry.spec(env_id)
        # Text cells are shown verbatim: as str, "gemgym[code]" would lose "[code]" as markup.
        requires = f"gemgym[{s.extra}]" if s.extra else ""
        table.add_row(Text(env_id), Text(s.description), Text(requires))
    stdout_console().print(table)  # piped: whole ids and descriptions, never cut at 80
