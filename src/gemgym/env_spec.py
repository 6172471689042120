"""Env ids and :class:`EnvSpec`: what the registry stores, with no dependency on the rest of gemgym.

The core (:attr:`gemgym.Env.spec`), the registry and the vector envs all refer to specs; keeping
them here, importing only :mod:`gemgym.errors`, means none of those layers imports another to name
the type.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gemgym.errors import DependencyNotInstalled, InvalidEnvIdError, RegistryError

__all__ = ["ENV_ID_RE", "EntryPoint", "EnvSpec", "parse_env_id"]

ENV_ID_RE = re.compile(
    r"^(?:(?P<namespace>[A-Za-z][\w.-]*):)?"
    r"(?P<name>[A-Za-z0-9_.+]+(?:-(?!v\d)[A-Za-z0-9_.+]+)*?)"
    r"(?:-v(?P<version>\d+))?"
    r"(?:-(?P<variant>[\w.+-]+))?$"
)

EntryPoint = str | Callable[..., Any]
"""``"package.module:Callable"`` or a callable; either must return a :class:`gemgym.Env` (the
registry checks what it returns)."""


def parse_env_id(env_id: str) -> tuple[str | None, str, int | None, str | None]:
    """Split an id into ``(namespace, name, version, variant)``.

    >>> parse_env_id("game:GuessTheNumber-v0-hard")
    ('game', 'GuessTheNumber', 0, 'hard')
    >>> parse_env_id("math:GSM8K")
    ('math', 'GSM8K', None, None)
    """
    m = ENV_ID_RE.match(env_id) if isinstance(env_id, str) else None
    if m is None:
        raise InvalidEnvIdError(
            f"{env_id!r} is not a valid env id; ids look like 'namespace:Name-v0-variant', "
            "e.g. 'game:GuessTheNumber-v0-hard' or 'math:GSM8K'"
        )
    version = m.group("version")
    return (
        m.group("namespace"),
        m.group("name"),
        int(version) if version else None,
        m.group("variant"),
    )


@dataclass(frozen=True)
class EnvSpec:
    """Everything needed to build an env: its id, entry point and default keyword arguments.

    Attributes:
        id: the env id.
        entry_point: ``"package.module:Callable"`` or a callable returning an :class:`Env`.
        kwargs: default keyword arguments; ``make(id, **kw)`` overrides them.
        max_episode_steps: when set, ``make`` wraps the env in :class:`~gemgym.wrappers.TimeLimit`.
        order_enforce: ``make`` wraps the env in :class:`~gemgym.wrappers.OrderEnforcing`.
        description: a one-line summary shown by ``gemgym list``.
        extra: the ``gemgym[extra]`` the env needs beyond the core install, if any.
    """

    id: str
    entry_point: EntryPoint
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    order_enforce: bool = True
    description: str = ""
    extra: str | None = None

    @property
    def namespace(self) -> str | None:
        """The part before ``:`` (e.g. ``game``)."""
        return parse_env_id(self.id)[0]

    def load(self) -> Callable[..., Any]:
        """Import and return the entry point's callable."""
        if callable(self.entry_point):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            if isinstance(e, DependencyNotInstalled):
                raise
            hint = f'; install it with: pip install "gemgym[{self.extra}]"' if self.extra else ""
            raise DependencyNotInstalled(
                f"cannot import {module_name!r} for env {self.id!r}: {e}{hint}"
            ) from e
        try:
            fn: Callable[..., Any] = getattr(module, attr)
        except AttributeError as e:
            raise RegistryError(
                f"entry point {self.entry_point!r} of env {self.id!r}: {module_name} has no {attr!r}"
            ) from e
        return fn

    def pprint(self) -> str:
        """A short multi-line description (id, entry point, kwargs, limits)."""
        lines = [f"id: {self.id}", f"entry_point: {self.entry_point}"]
        if self.kwargs:
            lines.append(f"kwargs: {dict(self.kwargs)}")
        if self.max_episode_steps is not None:
            lines.append(f"max_episode_steps: {self.max_episode_steps}")
        if self.extra:
            lines.append(f'requires: pip install "gemgym[{self.extra}]"')
        return "\n".join(lines)
