"""``gemgym list [PATTERN]``: list registered env ids."""

from __future__ import annotations

import argparse

from gemgym.errors import EnvNotFoundError, close_matches
from gemgym.registry import list_envs, match_ids, print_envs, registry


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym list``."""
    p.add_argument("pattern", nargs="?", help="glob ('game:*') or substring to filter ids")
    p.add_argument("--plain", action="store_true", help="one id per line, no table")


def _no_match(pattern: str) -> EnvNotFoundError:
    """The error for a pattern no id matches: close matches, and why a known id is missing."""
    ids = list_envs()
    hint = ""
    unavailable = match_ids(sorted(registry.unavailable), pattern)  # known, not registered
    reasons: dict[str, list[str]] = {}
    for env_id in unavailable:
        reasons.setdefault(registry.unavailable[env_id], []).append(env_id)
    for reason, known in reasons.items():
        shown = ", ".join(known[:4]) + (f" and {len(known) - 4} more" if len(known) > 4 else "")
        hint += f" {shown} {'is' if len(known) == 1 else 'are'} not registered: {reason}."
    bare = pattern.strip("*?[]")
    suggestions = close_matches(bare, ids) if bare else []
    namespace, colon, rest = pattern.partition(":")
    if colon and not suggestions:  # a misspelt namespace: suggest the pattern in the right one
        spaces = sorted({i.partition(":")[0] for i in ids})
        suggestions = [f"{ns}:{rest}" for ns in close_matches(namespace, spaces, n=1)]
    if suggestions:
        hint += f" Did you mean {' or '.join(repr(s) for s in suggestions)}?"
    return EnvNotFoundError(
        f"no env id matches {pattern!r}.{hint} Run `gemgym list` to see all {len(ids)} ids "
        "(a pattern is a glob such as 'game:*' or a substring)."
    )


def run(args: argparse.Namespace) -> int:
    """List the ids; a pattern that matches none is an error (exit 2) with close matches."""
    ids = list_envs(args.pattern)
    if args.pattern and not ids:
        raise _no_match(args.pattern)
    if args.plain:
        for env_id in ids:
            print(env_id)
    else:
        print_envs(args.pattern)
    return 0
