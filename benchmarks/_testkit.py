"""The test helpers the benchmarks share with the tests (``tests/helpers``: repository
scaffolding, not part of the gemgym package).

Importing this module puts ``tests/`` on ``sys.path`` (appended: it shadows nothing) and on
``PYTHONPATH`` (so worker processes such as Ray's can import the ``bench:*`` envs' module), then
re-exports what the benchmarks use.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parents[1] / "tests")
SCRIPTED_SERVER = str(Path(TESTS) / "helpers" / "scripted_server.py")
"""Run it as a script (``python SCRIPTED_SERVER --port N``): a scripted OpenAI-compatible server."""

if TESTS not in sys.path:
    sys.path.append(TESTS)
_paths = [TESTS, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(_paths))

from helpers.envs import (  # noqa: E402
    BlockingSleepEnv,
    CountingEnv,
    CpuBoundEnv,
    SleepEnv,
    register_bench_envs,
)
from helpers.net import free_port, serve_process, wait_for_port  # noqa: E402

__all__ = [
    "SCRIPTED_SERVER",
    "TESTS",
    "BlockingSleepEnv",
    "CountingEnv",
    "CpuBoundEnv",
    "SleepEnv",
    "free_port",
    "register_bench_envs",
    "serve_process",
    "wait_for_port",
]
