"""``gemgym train`` stopped by SIGINT/SIGTERM (a real subprocess) saves and resumes; periodic
checkpoints and curves; ``--resume`` with nothing to resume; one-line errors for missing inputs.

The runs are tiny (a 1-layer, width-16 model, 4 episodes an update): each takes seconds. An
interrupted run resumed to the end must equal the same run never interrupted: same curve rows,
same final evaluation (the checkpoint holds every random state)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from helpers.extras import needs_module

torch = needs_module("torch", "train")
needs_module("transformers", "train")

from gemgym.agents import make_agent  # noqa: E402
from gemgym.experience import rollout, write_jsonl  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::gemgym.rl.trainer.FormatErrorWarning")

ENV = "game:GuessTheNumber-v0-easy"
TINY = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--threads", "1"]
RUN = [*TINY, "--episodes-per-update", "4", "--estimator", "grpo", "--group-size", "2"]
RUN += ["--max-new-tokens", "8", "--eval-episodes", "8", "--no-eval-greedy"]
DETERMINISTIC = ("update", "episodes", "errors", "success", "mean_turns", "mean_return", "loss")
"""The curve columns that do not depend on the machine's speed."""


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("traces") / "random.jsonl"
    write_jsonl(rollout(ENV, make_agent("random"), episodes=16, seed=3), path)
    return path


def _gemgym(*argv: str) -> list[str]:
    return [sys.executable, "-m", "gemgym", "train", ENV, *argv]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"}


def _wait_for(stdout: IO[str], text: str, timeout: float = 120.0) -> list[str]:
    """Read the child's lines until one contains ``text``; returns the lines read."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never came; the child wrote:\n{''.join(lines)}")


def _interrupt(argv: list[str], when: str, sig: int) -> tuple[int, str, str]:
    """Start ``gemgym train argv``, send ``sig`` once a stdout line holds ``when``; returns
    the exit status, stdout and stderr."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    ) as child:
        try:
            assert child.stdout is not None
            seen = _wait_for(child.stdout, when)
            child.send_signal(sig)
            out, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
    return child.returncode, "".join(seen) + out, err


def _finish(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _checkpoint(out: Path) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(out / "checkpoint.pt", weights_only=False)
    return state


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "curves.csv", encoding="utf-8") as f:
        return [{k: r[k] for k in DETERMINISTIC} for r in csv.DictReader(f)]


def _final(out: Path) -> dict[str, Any]:
    final: dict[str, Any] = json.loads((out / "final.json").read_text())
    return final


def test_ctrl_c_during_sft_saves_and_resume_equals_an_uninterrupted_run(
    traces: Path, tmp_path: Path
) -> None:
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    sft = ["--sft", str(traces), "--sft-batch-size", "4", "--updates", "2", *RUN]
    # a long SFT (its first progress line at step 300), stopped at its first progress line
    status, out, err = _interrupt(
        _gemgym(*sft, "--sft-steps", "3000", "--out", str(stopped)), "SFT step 300/", signal.SIGINT
    )
    assert status == 130, err
    assert "SIGINT during SFT" in err and "--resume" in err
    assert "stopping after the current step" in out and "checkpoint saved" not in out  # once
    resume = err.split("resume with:\n", 1)[1].strip()
    assert resume.startswith("gemgym train game:GuessTheNumber-v0-easy") and "--resume" in resume
    saved = _checkpoint(stopped)
    assert not saved["sft_done"] and 300 <= saved["sft_step"] < 400  # nothing before 300 lost
    assert saved["update"] == 0 and not (stopped / "final.json").exists()
    done_steps = saved["sft_step"]

    # resumed with fewer SFT steps in all: it does the rest of them, then RL
    log = _finish(_gemgym(*sft, "--sft-steps", "500", "--out", str(stopped), "--resume"))
    assert f"resumed at SFT step {done_steps}/500" in log
    _finish(_gemgym(*sft, "--sft-steps", "500", "--out", str(whole)))
    assert _rows(stopped) == _rows(whole)
    assert _final(stopped)["eval"] == _final(whole)["eval"]
    for a, b in zip(
        _checkpoint(stopped)["model"].values(), _checkpoint(whole)["model"].values(), strict=True
    ):
        assert torch.equal(a, b)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_rl_saves_and_resume_equals_an_uninterrupted_run(
    tmp_path: Path, sig: int
) -> None:
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    status, out, err = _interrupt(
        _gemgym(*RUN, "--updates", "1000", "--out", str(stopped)), "update    3", sig
    )
    assert status == 128 + sig, err
    assert f"{signal.Signals(sig).name} at update" in err
    saved = _checkpoint(stopped)
    # the default checkpoint_every (25) saved nothing yet: the signal did, after update 3 or 4
    assert saved["update"] in (3, 4) and saved["sft_done"] is False
    assert [int(r["update"]) for r in _rows(stopped)] == list(range(1, saved["update"] + 1))
    assert (stopped / "curves.png").exists()

    log = _finish(_gemgym(*RUN, "--updates", "7", "--out", str(stopped), "--resume"))
    assert f"resumed at update {saved['update']}" in log
    _finish(_gemgym(*RUN, "--updates", "7", "--out", str(whole)))
    assert _rows(stopped) == _rows(whole)
    assert _final(stopped)["eval"] == _final(whole)["eval"]


def test_checkpoints_and_curves_are_written_every_few_seconds_without_a_signal(
    traces: Path, tmp_path: Path
) -> None:
    out = tmp_path / "killed"
    argv = _gemgym(*RUN, "--updates", "1000", "--out", str(out), "--checkpoint-every", "0")
    argv += ["--checkpoint-every-s", "0.5"]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env()
    ) as child:
        try:
            assert child.stdout is not None
            deadline = time.monotonic() + 120
            while not (out / "curves.csv").exists() and time.monotonic() < deadline:
                child.stdout.readline()
            child.stdout.readline()
        finally:
            # SIGKILL: no handler runs, only what was written periodically remains
            child.kill()
    saved = _checkpoint(out)
    assert saved["update"] >= 1
    rows = _rows(out)
    assert rows and int(rows[-1]["update"]) == saved["update"]
    assert (out / "curves.png").exists()
    assert not list(out.glob("*.partial"))


def test_resume_with_nothing_to_resume_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gemgym.cli import main
    from gemgym.errors import ConfigError
    from gemgym.rl.trainer import TrainConfig, Trainer

    out = tmp_path / "empty"
    assert main(["train", ENV, *RUN, "--updates", "1", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "nothing to resume" in err and str(out / "checkpoint.pt") in err
    assert "drop resume (--resume) to start a new run" in err
    assert "Traceback" not in err and not (out / "curves.csv").exists()
    cfg = TrainConfig.from_flags(out=str(out), updates=1, n_layer=1, n_embd=16, n_head=2)
    with pytest.raises(ConfigError, match="nothing to resume") as info:
        Trainer(cfg).run(resume=True)
    assert "run.out_dir" in str(info.value) and "--" not in str(info.value)
    # "auto" (scripts that rerun): a new run when there is nothing to resume
    cfg.eval.episodes = 0
    assert Trainer(cfg).run(resume="auto")["updates"] == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sft", "missing.jsonl"], "--sft '{tmp}/missing.jsonl' does not exist"),
        (["--init", "missing.pt"], "--init '{tmp}/missing.pt' does not exist"),
        (["--model", "{tmp}/no-model"], "--model '{tmp}/no-model' does not exist"),
        (["--model", "{tmp}"], "--model '{tmp}' could not be loaded"),
    ],
)
def test_missing_inputs_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    from gemgym.cli import main

    flags = [f.format(tmp=tmp_path) if "{" in f else f for f in flags]
    flags = [str(tmp_path / f) if f.startswith("missing") else f for f in flags]
    argv = ["train", ENV, "--updates", "1", "--out", str(tmp_path / "out"), *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemgym: error: ") and message.format(tmp=tmp_path) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", b'{"episode": 1}\n'])
def test_a_file_that_is_not_a_checkpoint_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    from gemgym.cli import main

    bad = tmp_path / "bad.pt"
    bad.write_bytes(content)
    argv = ["train", ENV, *TINY, "--updates", "1", "--eval-episodes", "0"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--init", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--init '{bad}' is not a checkpoint written by the gemgym trainer (" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    out = tmp_path / "b"  # a damaged checkpoint.pt in the run folder, resumed
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(content)
    assert main([*argv, "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--out's checkpoint" in err and "drop resume (--resume) to start this one over" in err
    assert len(err.strip().splitlines()) == 1


def test_the_curve_is_drawn_per_update_with_wall_time_on_a_second_axis(tmp_path: Path) -> None:
    from gemgym.rl.trainer.output import curves_figure, write_curves

    # a resumed run: a long stop between updates 3 and 4 does not squeeze the curve
    times = [10.0, 20.0, 30.0, 4000.0, 4010.0]
    rows = [
        {"update": u, "time_s": t, "success": 0.1 * u, "mean_turns": 2.0}
        for u, t in zip(range(1, 6), times, strict=True)
    ]
    write_curves(rows, tmp_path, "rebn")
    assert (tmp_path / "curves.png").stat().st_size > 0
    fig = curves_figure({"rebn": tmp_path / "curves.csv"}, x="update", window=1)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "update"
    assert list(ax.lines[0].get_xdata()) == [1.0, 2.0, 3.0, 4.0, 5.0]
    (top,) = ax.child_axes  # the wall time of each update, at the top
    assert top.get_xlabel() == "wall minutes"


def test_updates_that_end_in_the_same_hundredth_of_a_second_draw_without_a_warning(
    tmp_path: Path,
) -> None:
    import warnings

    from gemgym.rl.trainer.output import write_curves

    rows = [{"update": u, "time_s": 1.0, "success": 0.0, "mean_turns": 1.0} for u in (1, 2, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warned of a singular wall-time axis
        write_curves(rows, tmp_path, "rebn")
    assert (tmp_path / "curves.png").stat().st_size > 0


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--estimator", "grpo", "--no-eval-greedy", "--dual-clip", "0", "--overlap"],
        ["--env-kwargs", '{"partial_credit": false}', "--out", "runs/a b", "--time-budget", "60"],
        ["--entropy-coef", "0.1", "--entropy-turns", "2", "--entropy-target", "1.5", "0.25"],
    ],
)
def test_the_printed_resume_command_continues_the_same_config(flags: list[str]) -> None:
    import argparse
    import shlex

    from gemgym.cli.shared import RESUME, read_shared
    from gemgym.cli.train import add_arguments, config_from_args, resume_command

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(parser.parse_args([ENV, "--updates", "3", *flags]))
    argv = shlex.split(resume_command(cfg))
    assert argv[:2] == ["gemgym", "train"] and argv[-1] == "--resume"
    again = parser.parse_args(argv[2:])
    read_shared(again, RESUME)  # --resume is the shared option (gemgym.cli.shared)
    assert again.resume and config_from_args(again) == cfg


def test_init_takes_a_file_of_the_weights_alone(tmp_path: Path) -> None:
    """``--init`` takes the shipped warm start (``{"model": state_dict}``, no settings), as
    docs/results.md's recipe gives it, and any such file of a run's weights."""
    import torch

    from gemgym.cli import main

    shipped = Path(__file__).resolve().parents[2] / "docs/results/tinygpt/warm_start.pt"
    argv = ["train", ENV, "--updates", "1", "--eval-episodes", "0", "--threads", "1"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--init", str(shipped)]) == 0
    weights = tmp_path / "weights.pt"
    state = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)
    torch.save({"model": state["model"]}, weights)
    assert main([*argv, "--out", str(tmp_path / "b"), "--init", str(weights)]) == 0
    # the weights are the file's, tensor for tensor (not a fresh model that merely ran)
    from gemgym.rl.trainer import TrainConfig, Trainer

    for path in (shipped, weights):
        trainer = Trainer(TrainConfig.from_flags(out=str(tmp_path / "c"), updates=1))
        trainer.load_weights(path)
        saved = torch.load(path, weights_only=False)["model"]
        loaded = trainer.model.state_dict()
        assert saved.keys() == loaded.keys()
        assert all(torch.equal(saved[k], loaded[k]) for k in saved), path
