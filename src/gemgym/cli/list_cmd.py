"""``gemgym list [PATTERN]``: list registered env ids."""

from __future__ import annotations

import argparse

from gemgym.registry import list_envs, print_envs


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym list``."""
    p.add_argument("pattern", nargs="?", help="glob ('game:*') or substring to filter ids")
    p.add_argument("--plain", action="store_true", help="one id per line, no table")


def run(args: argparse.Namespace) -> int:
    """List the ids."""
    if args.plain:
        for env_id in list_envs(args.pattern):
            print(env_id)
    else:
        print_envs(args.pattern)
    return 0
