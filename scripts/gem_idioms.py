"""Run the list of common GEM idioms (tests/compat/gem_idioms.py) and print the count.

The same list runs on real GEM and on gemgym's GEM layer:

    /path/to/gem-venv/bin/python scripts/gem_idioms.py          # GEM itself
    python -m gemgym.compat.gem scripts/gem_idioms.py            # gemgym, through the switch

It prints one line per idiom (pass / FAIL / skip with the reason), which ``gem`` was imported,
and ``N/M idioms pass`` (skipped idioms are not counted as passes). ``-v`` shows each failure's
traceback tail; ``--json PATH`` writes the results. Exit status 0 when no idiom failed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import types
import warnings
from pathlib import Path

IDIOMS_FILE = Path(__file__).resolve().parent.parent / "tests" / "compat" / "gem_idioms.py"


def _load_idioms() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gem_idioms", IDIOMS_FILE)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {IDIOMS_FILE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gem_idioms"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="show each failure")
    parser.add_argument("-k", default="", help="run only idioms whose name contains this")
    parser.add_argument("--json", type=Path, help="write the results to this file")
    args = parser.parse_args(argv)

    warnings.simplefilter("ignore")  # the layer's GemCompatWarning, GEM's deprecations
    idioms = _load_idioms()
    gem = importlib.import_module("gem")
    where = getattr(gem, "__file__", "?")
    print(f"gem: {where}")
    outcomes = [idioms.run_idiom(i) for i in idioms.IDIOMS if args.k in i.name]
    for o in outcomes:
        mark = {"pass": "pass", "fail": "FAIL", "skip": "skip"}[o.status]
        reason = ""
        if o.status == "skip":
            reason = f"  ({o.detail})"
        elif o.status == "fail":
            reason = f"  ({o.detail.splitlines()[-1][:110]})"
        print(f"{mark:4}  {o.idiom.name}{reason}")
        if args.verbose and o.status == "fail":
            print("      " + o.detail.replace("\n", "\n      "))
    passed = sum(o.status == "pass" for o in outcomes)
    skipped = sum(o.status == "skip" for o in outcomes)
    failed = sum(o.status == "fail" for o in outcomes)
    print(f"{passed}/{len(outcomes)} idioms pass ({failed} fail, {skipped} skipped)")
    if args.json:
        rows = [{"name": o.idiom.name, "status": o.status, "detail": o.detail} for o in outcomes]
        args.json.write_text(json.dumps({"gem": where, "results": rows}, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
