"""Turning an id, an entry point or a factory into a :class:`~gemgym.multiagent.game.TextGame`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from gemgym.errors import ConfigError, EnvNotFoundError
from gemgym.multiagent.game import Match, TextGame

__all__ = ["GameSource", "load_game", "load_match"]

GameSource = str | TextGame | Callable[..., TextGame]
"""A registered id (``"ma:TicTacToe-v0"``), an entry point (``"pkg.module:GameClass"``), a
:class:`TextGame` class or factory, or a game instance."""

_SELFPLAY = "gemgym.multiagent.selfplay:SelfPlayEnv"


def _from_entry_point(entry_point: str) -> Callable[..., TextGame]:
    module, _, name = entry_point.partition(":")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"cannot load the game {entry_point!r}: {e}") from e
    if not callable(obj):
        raise ConfigError(f"{entry_point!r} is not a TextGame class or factory")
    return obj  # type: ignore[no-any-return]


def load_game(game: GameSource, game_kwargs: Mapping[str, Any] | None = None) -> TextGame:
    """Build the game ``game`` names, with ``game_kwargs`` over its registered defaults."""
    from gemgym.registry import check_kwargs, registry

    kwargs = dict(game_kwargs or {})
    if isinstance(game, TextGame):
        if kwargs:
            raise ConfigError("game_kwargs apply to a game id or factory, not to a game instance")
        return game
    if isinstance(game, str):
        factory: Callable[..., TextGame] | None = None
        try:
            spec = registry.spec(game)
        except EnvNotFoundError:
            if "." not in game.partition(":")[0]:
                raise
        else:
            if spec.entry_point != _SELFPLAY or not isinstance(spec.kwargs.get("game"), str):
                raise ConfigError(
                    f"{game!r} is a single-agent env, not a multi-agent game; "
                    "see gemgym.list_envs('ma:*') and gemgym.list_envs('ta:*')"
                )
            kwargs = {**spec.kwargs.get("game_kwargs", {}), **kwargs}
            factory = _from_entry_point(spec.kwargs["game"])
        if factory is None:
            factory = _from_entry_point(game)
    elif callable(game):
        factory = game
    else:
        raise ConfigError(f"expected a game id, entry point or factory, got {game!r}")
    check_kwargs(factory, kwargs, f"game {game!r}")
    built = factory(**kwargs)
    if not isinstance(built, TextGame):
        raise ConfigError(f"{game!r} built {type(built).__name__}, not a TextGame")
    return built


def load_match(
    game: GameSource,
    game_kwargs: Mapping[str, Any] | None,
    max_invalid_moves: int,
    invalid_move_penalty: float,
) -> Match:
    """:func:`load_game`, played under the rules of a :class:`Match`."""
    return Match(
        load_game(game, game_kwargs),
        max_invalid_moves=max_invalid_moves,
        invalid_move_penalty=invalid_move_penalty,
    )
