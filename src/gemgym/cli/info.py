"""``gemgym info ID``: show an env's card (the docstring of its module) and its spec."""

from __future__ import annotations

import argparse
import importlib
import inspect

from gemgym.registry import spec


def env_card(env_id: str) -> str:
    """The card of ``env_id``: its spec and its module docstring."""
    s = spec(env_id)
    doc = ""
    if isinstance(s.entry_point, str):
        module_name = s.entry_point.partition(":")[0]
        game = s.kwargs.get("game")  # a multi-agent game's card is its game module's
        if isinstance(game, str) and ":" in game:
            module_name = game.partition(":")[0]
        try:
            doc = inspect.getdoc(importlib.import_module(module_name)) or ""
        except ImportError as e:
            doc = f"(module {module_name} cannot be imported: {e})"
    else:
        doc = inspect.getdoc(s.entry_point) or ""
    return f"{s.pprint()}\n\n{doc}".rstrip() + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym info``."""
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-easy")


def run(args: argparse.Namespace) -> int:
    """Print the card."""
    print(env_card(args.env_id), end="")
    return 0
