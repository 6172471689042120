"""``examples/trl/train.py`` learns: its default CPU run (tiny model, format warm-up, 40 GRPO
updates of 32 episodes, 3-4 minutes on 2 shared cores) ends with a higher mean env return than it
starts with, by the margin docs/integrations.md states."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.extras import needs_module

needs_module("trl", "trl")
pytestmark = [pytest.mark.trl, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl" / "train.py"
FIRST_LAST_MARGIN = 0.15
"""docs/integrations.md: the last update's mean return exceeds the first's by at least this."""
WINDOW_MARGIN = 0.1
"""... and the mean of the last 5 updates exceeds the mean of the first 5 by at least this."""


def test_the_example_reward_rises(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--seed", "0", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    curve = json.loads((tmp_path / "curve.json").read_text())
    returns = [c["mean_return"] for c in curve]
    assert len(returns) == 40
    # TRL had a signal: episodes' returns differed, so GRPO's advantages and gradients were not 0
    assert all(c["grad_norm"] > 0 for c in curve)
    assert returns[-1] >= returns[0] + FIRST_LAST_MARGIN
    assert sum(returns[-5:]) / 5 >= sum(returns[:5]) / 5 + WINDOW_MARGIN
    # what it learned first: actions the env can read
    first_errors = sum(c["format_errors"] for c in curve[:5]) / 5
    last_errors = sum(c["format_errors"] for c in curve[-5:]) / 5
    assert last_errors < first_errors
