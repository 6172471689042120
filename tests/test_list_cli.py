"""``gemgym list``: a pattern that matches nothing is an error, and piped tables are not cut."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _gemgym(*args: str, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "gemgym", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("nosuch", "no env id matches 'nosuch'"),
        ("GuessTheNumbr", "Did you mean 'ta:GuessTheNumber-v0'"),
        ("gam:*", "Did you mean 'game:*'?"),
        ("ta:Wordle-v0", "TextArena's Wordle-v0 is not registered: needs NLTK"),
    ],
)
def test_a_pattern_that_matches_nothing_is_an_error(pattern: str, message: str) -> None:
    for extra in ([], ["--plain"]):
        out = _gemgym("list", pattern, *extra)
        assert out.returncode == 2 and out.stdout == ""
        assert message in out.stderr and "Traceback" not in out.stderr
        assert out.stderr.strip().count("\n") == 0


def test_a_piped_table_keeps_whole_ids_and_descriptions() -> None:
    out = _gemgym("list", "rg:")
    assert out.returncode == 0, out.stderr
    assert "rg:intermediate_integration" in out.stdout  # 26 characters of id, one cell
    assert "reasoning-gym intermediate_integration, boxed answer" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) > 80


def test_columns_still_sets_the_width() -> None:
    out = _gemgym("list", "rg:", columns="60")
    assert out.returncode == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 60
