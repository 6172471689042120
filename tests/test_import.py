"""``import gemgym`` is fast and has no side effects."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "datasets", "reasoning_gym", "ray", "mcp", "math_verify", "bm25s")


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


def test_import_is_fast_and_light() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "import gemgym\n"
        "dt = time.perf_counter() - t\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(min(dt, 9.9), ','.join(heavy) or '-')\n"
    )
    # best of three, so a cold disk cache does not decide
    times = []
    for _ in range(3):
        dt, heavy = _run(code).split()
        assert heavy == "-", f"import gemgym imported {heavy}"
        times.append(float(dt))
    assert min(times) < 0.3


def test_import_has_no_side_effects() -> None:
    code = (
        "import logging, random\n"
        "state = random.getstate()\n"
        "import gemgym\n"
        "assert random.getstate() == state\n"
        "assert not logging.getLogger().handlers\n"
        "print('ok')\n"
    )
    assert _run(code) == "ok"


def test_listing_envs_imports_nothing_heavy() -> None:
    code = (
        "import sys, gemgym\n"
        "ids = gemgym.list_envs()\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(len(ids), ','.join(heavy) or '-')\n"
    )
    n, heavy = _run(code).split()
    assert int(n) > 0
    assert heavy == "-", f"discovering envs imported {heavy}"
