"""GridObservation: the board alone, one row a line, for small models on grid games."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gemgym
from gemgym.errors import ConfigError
from gemgym.rl.collector import Collector
from gemgym.wrappers.factory import get_wrapper_fns
from gemgym.wrappers.grid import GridObservation


def test_sudoku_board_one_row_a_line() -> None:
    env = GridObservation(gemgym.make("game:Sudoku-v0-easy"))
    obs, _ = env.reset(seed=1)
    assert obs == ".34.\n2..1\n....\n42.."
    obs, reward, terminated, truncated, _ = env.step(r"\boxed{1 1 1}")
    assert obs == "134.\n2..1\n....\n42.."  # the digit is on the board
    assert reward > 0 and not terminated and not truncated


def test_minesweeper_board_after_the_first_reveal() -> None:
    env = GridObservation(gemgym.make("game:Minesweeper-v0-easy"))
    obs, _ = env.reset(seed=1)
    assert obs == "\n".join(["....."] * 5)
    obs, reward, *_ = env.step(r"\boxed{reveal 2 2}")
    assert obs == ".....\n2212.\n0001.\n0012.\n001.."
    assert reward > 0
    obs, *_ = env.step(r"\boxed{flag 0 4}")
    assert obs.splitlines()[0] == "....F"
    # hidden mines never show; the one that ends the game is one character, like every cell
    base = env.unwrapped
    row, col = divmod(base.grid.index(-1), base.cols)
    obs, reward, terminated, *_ = env.step(rf"\boxed{{reveal {row} {col}}}")
    assert terminated and reward == 0.0
    lines = obs.splitlines()
    assert lines[row][col] == "*" and all(len(line) == 5 for line in lines)
    assert obs.count("*") == 1


def test_message_keeps_the_env_text_above_the_grid() -> None:
    env = GridObservation(gemgym.make("game:Sudoku-v0-easy"), message=True)
    env.reset(seed=1)
    obs, *_ = env.step(r"\boxed{1 1 1}")
    text, grid = obs.split("\n", 1)
    assert "correct" in text and grid == "134.\n2..1\n....\n42.."


def test_a_game_without_a_grid_renderer_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="Minesweeper"):
        GridObservation(gemgym.make("game:GuessTheNumber-v0-easy"))


def test_the_factory_name_and_the_collector() -> None:
    seen: list[str] = []

    def policy(observations: list[str]) -> list[str]:
        seen.extend(observations)
        return [r"\boxed{reveal 2 2}"] * len(observations)

    with Collector(
        "game:Minesweeper-v0-easy",
        policy,
        num_envs=2,
        seed=3,
        wrappers=get_wrapper_fns("grid"),
    ) as col:
        batch = col.collect(2)
    assert len(batch.episodes) == 2
    # every observation the policy saw is a 5x5 grid
    assert seen and all(len(o.splitlines()) == 5 for o in seen)


def test_the_trainer_refuses_an_unknown_wrapper_name() -> None:
    from gemgym.rl.trainer.config import RunConfig

    with pytest.raises(ConfigError, match="grid"):
        RunConfig(updates=1, wrappers="gird")


def _is_grid(obs: str, size: int) -> bool:
    rows = obs.split("\n")
    return len(rows) == size and all(len(r) == size for r in rows)


def test_gemgym_run_plays_and_records_the_grid(tmp_path: Path) -> None:
    from gemgym.cli import main
    from gemgym.experience import read_jsonl

    out = tmp_path / "grid.jsonl"
    argv = ["run", "game:Sudoku-v0-easy", "--agent", "oracle", "--wrappers", "grid"]
    assert main([*argv, "--episodes", "3", "--out", str(out), "--quiet"]) == 0
    episodes = list(read_jsonl(out))
    assert len(episodes) == 3 and all(e.success for e in episodes)
    for e in episodes:  # every observation recorded is the 4x4 board alone
        observations = [e.initial_observation, *(t.next_observation for t in e.transitions)]
        assert all(_is_grid(o, 4) for o in observations), observations


def test_gemgym_run_resume_takes_the_same_wrappers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main
    from gemgym.experience import read_jsonl

    out = tmp_path / "grid.jsonl"
    argv = ["run", "game:Sudoku-v0-easy", "--agent", "oracle", "--quiet", "--out", str(out)]
    assert main([*argv, "--wrappers", "grid", "--episodes", "2"]) == 0
    capsys.readouterr()
    # without the grid the file would mix two observation formats: refused, the file unchanged
    before = out.read_bytes()
    assert main([*argv, "--episodes", "4", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "other --wrappers or --env-kwarg" in err and "Traceback" not in err
    assert out.read_bytes() == before
    assert main([*argv, "--wrappers", "grid", "--episodes", "4", "--resume"]) == 0
    episodes = list(read_jsonl(out))
    assert [e.index for e in episodes] == [0, 1, 2, 3]
    assert all(_is_grid(e.initial_observation, 4) for e in episodes)


def test_gemgym_run_refuses_a_wrapper_that_does_not_fit_the_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main

    argv = ["run", "game:GuessTheNumber-v0-easy", "--wrappers", "grid", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "GridObservation renders the boards of" in err and "Traceback" not in err
    assert not (tmp_path / "x.jsonl").exists()


def test_gemgym_eval_plays_the_grid_and_resume_and_rescore_keep_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gemgym.cli import main
    from gemgym.evaluation.results import RunDir
    from gemgym.evaluation.suites import EvalEnv

    run = tmp_path / "run"
    argv = ["eval", "game:Sudoku-v0-easy", "--agent", "oracle", "--tasks", "2", "--quiet"]
    assert main([*argv, "--wrappers", "grid", "--out", str(run)]) == 0
    records = RunDir.open_existing(str(run)).read_records()
    assert len(records) == 2 and all(r["success"] for r in records)
    assert all(_is_grid(t["observation"], 4) for r in records for t in r["transitions"])
    assert json.loads((run / "run.json").read_text())["wrappers"] == "grid"
    capsys.readouterr()
    # a resumed run takes the same wrappers
    assert main([*argv, "--out", str(run), "--resume"]) == 2
    assert "other settings (wrappers)" in capsys.readouterr().err
    assert main([*argv, "--wrappers", "grid", "--out", str(run), "--resume"]) == 0
    # rescoring replays the episodes on the wrapped env
    made: list[str] = []
    make = EvalEnv.make

    def spy(self: EvalEnv, **kw: object) -> object:
        env = make(self, **kw)  # type: ignore[arg-type]
        made.append(env.reset(seed=0)[0])
        return env

    monkeypatch.setattr(EvalEnv, "make", spy)
    assert main(["eval", "rescore", str(run)]) == 0
    assert "rescored 2 episodes (0 changed" in capsys.readouterr().out
    assert made and all(_is_grid(o, 4) for o in made)
