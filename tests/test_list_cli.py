"""``gemgym list``: a pattern that matches nothing is an error; piped tables (list, run, eval) are
not cut at 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
        ("ta:Wordle-v0", "ta:Wordle-v0, ta:Wordle-v0-hardcore, ta:Wordle-v0-long, "),
        ("ta:Wordle*", "are not registered: needs NLTK's 'words' data"),
        ("Chess", "ta:Chess-v0, ta:Chess-v0-blind, ta:Chess-v0-long are not registered: "),
    ],
)
def test_a_pattern_that_matches_nothing_is_an_error(pattern: str, message: str) -> None:
    for extra in ([], ["--plain"]):
        out = _gemgym("list", pattern, *extra)
        assert out.returncode == 2 and out.stdout == ""
        assert message in out.stderr and "Traceback" not in out.stderr
        assert out.stderr.strip().count("\n") == 0


def test_making_a_known_id_that_is_not_registered_says_why() -> None:
    import gemgym
    from gemgym.errors import EnvNotFoundError

    with pytest.raises(EnvNotFoundError, match=r"It cannot be registered here: TextArena's module"):
        gemgym.make("ta:Chess-v0")
    out = _gemgym("run", "ta:Wordle-v0", "--agent", "random", "--episodes", "1")
    assert out.returncode == 2 and "needs NLTK's 'words' data" in out.stderr


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


@pytest.mark.parametrize("command", ["run", "eval"])
def test_piped_run_and_eval_tables_keep_whole_env_names(tmp_path: Path, command: str) -> None:
    env_id = "game:GuessTheNumber-v0-easy"  # eval's table with pass@4 was cut at 80 columns
    count = ["--episodes", "2"] if command == "run" else ["--tasks", "2", "--n", "4"]
    out = _gemgym(command, env_id, "--agent", "oracle", *count, "--out", str(tmp_path / "o"))
    assert out.returncode == 0, out.stderr
    title = f"oracle agent on {env_id}" if command == "run" else f"{env_id} "
    assert title in out.stdout and "\u2026" not in out.stdout  # no ellipsis: nothing cut


@pytest.mark.parametrize("extra", [[], ["--plain"]])
def test_a_reader_that_stops_early_gets_no_traceback(extra: list[str]) -> None:
    """``gemgym list --plain | head -3``: the pipe closes before gemgym has written."""
    with subprocess.Popen(
        [sys.executable, "-m", "gemgym", "list", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # closed before the child has imported gemgym
        err = child.stderr.read()
    assert child.returncode == 1 and err == ""  # rich's tables exit 1 on a closed pipe too
