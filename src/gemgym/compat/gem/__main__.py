"""``python -m gemgym.compat.gem [-m module | script.py] [args...]``: run GEM code on gemgym.

Turns the import switch on (``import gem`` gives :mod:`gemgym.compat.gem`, unless a real
``gem-llm`` is installed) and runs the script or module as ``__main__`` with the remaining
arguments, as ``python script.py args`` / ``python -m module args`` would.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -m gemgym.compat.gem [-m module | script.py] [args...]"


def main(argv: list[str] | None = None) -> int:
    """Run ``argv`` (default ``sys.argv[1:]``) with the switch on; the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        print(__doc__.split("\n\n", 1)[1].strip() if __doc__ else "")
        return 0 if args else 2
    from gemgym.compat.gem import install

    if args[0] == "-m":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        # sys.path[0] as `python -m module` has it (the working directory) before the switch
        # looks for a real gem, so a GEM checkout there is found exactly as plain Python would
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        switched = install()
        module = args[1]
        if switched and (module == "gem" or module.startswith("gem.")):
            module = f"gemgym.compat.{module}"  # e.g. -m gem.tools.mcp_server.time_mcp
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script = args[0]
        sys.argv = [script, *args[1:]]
        # `python script.py` puts the script's directory first, not the working directory: a
        # gem package beside the script is importable, one in the working directory is not
        here = os.path.dirname(os.path.abspath(script))
        if sys.path and sys.path[0] in ("", os.getcwd()):
            sys.path[0] = here  # `python -m gemgym.compat.gem` put the working directory there
        else:
            sys.path.insert(0, here)
        install()
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
