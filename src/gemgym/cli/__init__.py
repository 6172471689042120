"""The ``gemgym`` command: ``list``, ``info``, ``play``, ``run``, ``audit``, ... (one module per
subcommand).

Bad input gets a one-line ``gemgym: error: ...`` and exit status 2, never a traceback; gemgym's
own warnings (a dataset's shipped sample, format errors in training, ...) are one line each,
``gemgym: warning: ...``, not Python's file, line and source.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import warnings
from collections.abc import Iterator, Sequence

from gemgym.errors import GemGymError

__all__ = ["main"]

# subcommand -> module that defines add_arguments(parser) and run(args) -> int
SUBCOMMANDS = {
    "list": ("gemgym.cli.list_cmd", "list registered env ids"),
    "info": ("gemgym.cli.info", "show an env's card (rules, actions, rewards)"),
    "play": ("gemgym.cli.play", "play an env yourself in the terminal"),
    "run": ("gemgym.cli.run", "run an agent on an env and summarise the episodes"),
    "eval": ("gemgym.cli.eval", "evaluate an agent on env suites (pass@k, reports, --resume)"),
    "audit": ("gemgym.cli.audit", "play exploit policies against envs; fail if one beats random"),
    "train": ("gemgym.cli.train", "train a causal-LM policy with RL (needs gemgym[train])"),
    "serve": ("gemgym.cli.serve", "serve an env as an OpenEnv server (needs gemgym[openenv])"),
    "serve-retriever": ("gemgym.cli.serve_retriever", "serve a search corpus over HTTP"),
    "serve-wiki": ("gemgym.cli.serve_wiki", "serve WikiGame's pages with kiwix-serve (ZIM file)"),
    "gem-run": ("gemgym.cli.gem_run", "run a GEM script unchanged (import gem -> gemgym)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="gemgym", description="gemgym: a gym for agentic LLMs.")
    from gemgym import __version__

    parser.add_argument("--version", action="version", version=f"gemgym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(_module=module)
    return parser


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """While a command runs, a warning of a gemgym category is shown as one line,
    ``gemgym: warning: MESSAGE`` (others keep Python's form). Only the text changes: where a
    warning is recorded (``pytest.warns``, ``catch_warnings(record=True)``) it is unchanged."""
    python_form = warnings.formatwarning

    def formatted(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        if category.__module__.split(".")[0] == "gemgym":
            return f"gemgym: warning: {message}\n"
        return python_form(message, category, filename, lineno, line)

    warnings.formatwarning = formatted
    try:
        yield
    finally:
        warnings.formatwarning = python_form


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gemgym`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _one_line_warnings():
            status: int = importlib.import_module(args._module).run(args)
    except GemGymError as e:
        print(f"gemgym: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gemgym: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `gemgym list --plain | head`: the reader has what it wanted
        _drop_stdout()
        return 1  # no traceback; 1 as rich's tables and Python's recipe exit on a closed pipe
    return status


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of a closed pipe cannot raise
    again at exit (Python's documented recipe for SIGPIPE)."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # stdout is not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
