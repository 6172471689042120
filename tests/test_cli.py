"""The ``gemgym`` command, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gemgym.experience as experience
from gemgym.agents import OracleAgent
from helpers.extras import skip_without


def gemgym(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gemgym", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def test_list() -> None:
    out = gemgym("list", "game:GuessTheNumber-*", "--plain")
    assert out.returncode == 0
    assert out.stdout.split() == [
        "game:GuessTheNumber-v0-easy",
        "game:GuessTheNumber-v0-hard",
        "game:GuessTheNumber-v0-random",
    ]
    table = gemgym("list", "GuessTheNumber")
    assert table.returncode == 0 and "GuessTheNumber-v0-hard" in table.stdout


def test_info_shows_the_card() -> None:
    out = gemgym("info", "game:GuessTheNumber-v0-hard")
    assert out.returncode == 0
    assert "max_turns" in out.stdout and "binary search" in out.stdout


def test_run_oracle_writes_traces_and_summary(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    out = gemgym(
        "run",
        "game:GuessTheNumber-v0-hard",
        "--agent",
        "oracle",
        "--episodes",
        "20",
        "--seed",
        "3",
        "--out",
        str(path),
        "--quiet",
    )
    assert out.returncode == 0, out.stderr
    assert "100.0%" in out.stdout and "mean turns" in out.stdout
    lines = path.read_text().splitlines()
    assert len(lines) == 20
    first = json.loads(lines[0])
    assert first["env_id"] == "game:GuessTheNumber-v0-hard" and first["seed"] == 3


def test_run_random_with_env_kwargs() -> None:
    out = gemgym(
        "run",
        "game:GuessTheNumber-v0-easy",
        "--agent",
        "random",
        "--episodes",
        "5",
        "--env-kwarg",
        "max_turns=1",
        "--quiet",
    )
    assert out.returncode == 0, out.stderr
    assert "1.00" in out.stdout  # mean turns is 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "game:GuessTheNumbr-v0-easy"], "Did you mean"),
        (["run", "game:GuessTheNumber-v0-easy", "--env-kwarg", "max_turn=3"], "max_turns"),
        (["run", "game:GuessTheNumber-v0-easy", "--episodes", "0"], "--episodes"),
        (["run", "game:GuessTheNumber-v0-easy", "--agent", "openai"], "--model"),
        (["info", "nope:Nothing"], "no env registered"),
        pytest.param(
            [
                "run",
                "game:GuessTheNumber-v0-easy",
                "--agent",
                "openai",
                "--model",
                "m",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--episodes",
                "1",
                "--quiet",
                "--timeout",
                "2",
            ],
            "cannot reach the LLM server",
            marks=skip_without("openai"),
        ),
    ],
)
def test_bad_input_is_one_line_without_traceback(args: list[str], message: str) -> None:
    out = gemgym(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert message in out.stderr
    assert out.stderr.strip().count("\n") == 0


def test_bad_flag_exits_nonzero() -> None:
    out = gemgym("run", "game:GuessTheNumber-v0-easy", "--no-such-flag")
    assert out.returncode == 2 and "Traceback" not in out.stderr


def test_play_reads_moves_from_stdin() -> None:
    out = gemgym("play", "game:GuessTheNumber-v0-easy", "--seed", "0", stdin=":hint\n:quit\n")
    assert out.returncode == 0
    assert "Guess The Number" in out.stdout and "hint: \\boxed{5}" in out.stdout


def _wide(*args: str) -> subprocess.CompletedProcess[str]:
    """``gemgym ARGS`` with a terminal wide enough that no table cell wraps."""
    return subprocess.run(
        [sys.executable, "-m", "gemgym", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


@pytest.mark.parametrize(("pattern", "extra"), [("code:HumanEval", "code"), ("rg:*", "rg")])
def test_list_shows_the_extra_in_brackets(pattern: str, extra: str) -> None:
    out = _wide("list", pattern)
    assert out.returncode == 0, out.stderr
    assert f"gemgym[{extra}]" in out.stdout  # not eaten as rich markup


def test_list_shows_brackets_of_descriptions_verbatim(tmp_path: Path) -> None:
    plugin = tmp_path / "bracket_plugin.py"
    plugin.write_text(
        "import gemgym\n"
        "gemgym.register('test:Brackets-v0', "
        "'gemgym.envs.games.guess_the_number:GuessTheNumberEnv', "
        "description='guess in [1, 10] with [bold]no[/bold] markup', extra='math')\n"
        "from gemgym.cli import main\n"
        "raise SystemExit(main(['list', 'test:Brackets-v0']))\n"
    )
    out = subprocess.run(
        [sys.executable, str(plugin)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert out.returncode == 0, out.stderr
    assert "guess in [1, 10] with [bold]no[/bold] markup" in out.stdout
    assert "gemgym[math]" in out.stdout


def test_run_names_an_output_path_with_brackets(tmp_path: Path) -> None:
    path = tmp_path / "traces[b].jsonl"  # [b] is rich markup for bold
    args = ["game:GuessTheNumber-v0-easy", "--episodes", "1", "--out", str(path), "--quiet"]
    out = _wide("run", *args)
    assert out.returncode == 0, out.stderr
    assert path.exists()
    assert f"wrote 1 episodes to {path}" in out.stderr


def test_run_writes_its_traces_through_write_jsonl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gemgym run --out`` has no writer of its own: the file is what ``write_jsonl`` writes."""
    import argparse

    from gemgym.cli import run as run_cmd

    calls: list[object] = []
    real = experience.write_jsonl

    def spy(episodes: Any, path: Any) -> int:
        calls.append(path)
        return real(episodes, path)

    monkeypatch.setattr(experience, "write_jsonl", spy)
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    path = tmp_path / "t.jsonl"
    args = ["game:GuessTheNumber-v0-easy", "--episodes", "3", "--seed", "1", "--out", str(path)]
    assert run_cmd.run(parser.parse_args([*args, "--quiet"])) == 0
    assert calls[0] == str(path)  # (write_jsonl then writes to the file it opened)
    expected = list(
        experience.rollout("game:GuessTheNumber-v0-easy", OracleAgent(), episodes=3, seed=1)
    )
    assert [e.to_dict() for e in experience.read_jsonl(path)] == [e.to_dict() for e in expected]
