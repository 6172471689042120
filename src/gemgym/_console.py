"""The console gemgym prints its tables to (``gemgym list``, ``run``, ``eval``, ``audit``)."""

from __future__ import annotations

import os
import sys
from typing import Any


def stdout_console() -> Any:
    """A rich console on stdout; piped (no terminal, no ``COLUMNS``), its lines are as long as
    the table needs, so ids and env names are never cut at 80 columns (a shell pipe, ``| grep``,
    a log file, a test's captured stdout)."""
    from rich.console import Console

    console = Console(file=sys.stdout)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(file=sys.stdout, width=100_000)
    return console
