"""``gemgym gem-run [-m module | script.py] [args...]``: run a GEM script or module on gemgym.

The same as ``python -m gemgym.compat.gem ...``: ``import gem`` resolves to
:mod:`gemgym.compat.gem` (unless a real ``gem-llm`` is installed; then that one is used).
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``gemgym gem-run``."""
    p.add_argument("-m", dest="module", help="run this module as __main__ (as python -m)")
    p.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        help="the script and its arguments (or, with -m, the module's arguments)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the script or module with the import switch on."""
    from gemgym.compat.gem.__main__ import main

    argv = list(args.argv)
    if args.module:
        argv = ["-m", args.module, *argv]
    return main(argv)
