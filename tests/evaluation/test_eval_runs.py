"""``gemgym eval`` against a scripted OpenAI-compatible server on loopback (real HTTP): faults,
errors as records, --resume after a kill, Ctrl-C, the same results at any concurrency."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gemgym.cli import main
from helpers.extras import skip_without
from helpers.scripted_server import ScriptedChatServer

needs_openai = skip_without("openai")  # the chat agent's HTTP client

FIVE_ENVS = [
    "game:GuessTheNumber-v0-easy",
    "game:Hangman-v0-easy",
    "game:Mastermind-v0-easy",
    "eval:AIME24",
    "eval:MATH500",
]


def _seeded_reply(body: dict[str, Any]) -> str:
    """A deterministic 'model': its answer depends only on the request's seed."""
    return f"\\boxed{{{body.get('seed', 0) % 10 + 1}}}"


def _lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines() if x]


def _eval(run: Path, url: str, *extra: str) -> int:
    return main(
        ["eval", *FIVE_ENVS, "--model", "m", "--base-url", url, "--quiet", "--out", str(run),
         "--tasks", "6", "--limit", "6", "--n", "2", "--k", "1", "--k", "2", *extra]
    )  # fmt: skip


@needs_openai
def test_a_5_env_suite_completes_with_500s_and_hangs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with ScriptedChatServer(_seeded_reply, fail_rate=0.30, hang_rate=0.05, seed=1) as server:
        status = _eval(
            run, server.url, "--timeout", "0.5", "--max-retries", "3", "--retry-backoff", "0.01",
            "--concurrency", "16",
        )  # fmt: skip
        counts = dict(server.counts)
    assert counts["failed"] > 10 and counts["hung"] > 0  # the faults really happened
    records = _lines(run)
    keys = collections.Counter((r["env"], r["task"], r["sample"]) for r in records)
    summary = json.loads((run / "summary.json").read_text())
    planned = summary["run"]["planned_episodes"]
    assert planned == 4 * 6 * 2 + 5 * 2  # the AIME24 sample has 5 problems
    assert len(keys) == planned and set(keys.values()) == {1}  # each episode once
    for r in records:
        assert r["status"] in ("ok", "error")
        if r["status"] == "error":
            assert "gave up after 4 tries" in r["error"]
            assert "HTTP 500" in r["error"] or "did not answer within 0.5 s" in r["error"]
    errors = sum(r["status"] == "error" for r in records)
    assert summary["summary"]["overall"]["errors"] == errors
    assert summary["summary"]["overall"]["scored"] == len(records) - errors
    assert summary["run"]["status"] == "complete"
    assert status == (1 if errors else 0)
    assert (run / "report.html").read_text().startswith("<!DOCTYPE html>")
    # resuming plays the failed episodes again, and only them
    with ScriptedChatServer(_seeded_reply) as server:
        assert _eval(run, server.url, "--resume") == 0
        assert len({(m["seed"]) for m in server.requests}) >= errors
    final = json.loads((run / "summary.json").read_text())["summary"]["overall"]
    assert final["errors"] == 0 and final["scored"] == planned


@needs_openai
def test_failures_are_errors_never_zeros(tmp_path: Path, capsys: Any) -> None:
    with ScriptedChatServer(fail_rate=1.0) as server:
        status = main(
            ["eval", "game:GuessTheNumber-v0-easy", "--model", "m", "--base-url", server.url,
             "--out", str(tmp_path / "a"), "--tasks", "3", "--max-retries", "2",
             "--retry-backoff", "0"]
        )  # fmt: skip
    assert status == 1
    progress = capsys.readouterr().err
    assert "errors 3" in progress and "ep/s" in progress  # the progress display counts them
    records = _lines(tmp_path / "a")
    assert [r["status"] for r in records] == ["error"] * 3
    assert all("HTTP 500" in r["error"] and "3 tries" in r["error"] for r in records)
    block = json.loads((tmp_path / "a" / "summary.json").read_text())["summary"]["envs"]
    env = block["game:GuessTheNumber-v0-easy"]
    assert env["errors"] == 3 and env["scored"] == 0 and env["success_rate"] is None


@needs_openai
def test_a_hung_server_is_reported_as_not_answering(tmp_path: Path) -> None:
    with ScriptedChatServer(hang_rate=1.0) as server:
        t0 = time.monotonic()
        main(
            ["eval", "game:GuessTheNumber-v0-easy", "--model", "m", "--base-url", server.url,
             "--quiet", "--out", str(tmp_path / "a"), "--tasks", "2", "--max-retries", "1",
             "--retry-backoff", "0", "--timeout", "0.3"]
        )  # fmt: skip
        assert time.monotonic() - t0 < 10
    (record, *_) = _lines(tmp_path / "a")
    assert "did not answer within 0.3 s" in record["error"]
    assert "cannot reach" not in record["error"]


@needs_openai
def test_results_are_the_same_at_any_concurrency(tmp_path: Path) -> None:
    def strip(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k not in ("latency_s", "wall_s")}

    runs = []
    for c in (1, 7):
        with ScriptedChatServer(_seeded_reply) as server:
            assert _eval(tmp_path / f"c{c}", server.url, "--concurrency", str(c)) == 0
        runs.append(sorted((strip(r) for r in _lines(tmp_path / f"c{c}")), key=json.dumps))
    assert runs[0] == runs[1]
    s1, s7 = (json.loads((tmp_path / f"c{c}" / "summary.json").read_text()) for c in (1, 7))
    assert _no_latency(s1["summary"]) == _no_latency(s7["summary"])


def _no_latency(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _no_latency(v) for k, v in x.items() if k != "mean_latency_s"}
    return x


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _subprocess_eval(run: Path, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gemgym", "eval", *FIVE_ENVS, "--model", "m", "--base-url", url,
         "--quiet", "--out", str(run), "--tasks", "6", "--limit", "6", "--n", "2",
         "--concurrency", "4"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # as from a terminal: a test run started in the background inherits SIGINT ignored
        preexec_fn=_default_sigint,
    )  # fmt: skip


def _wait_for_lines(run: Path, n: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    path = run / "episodes.jsonl"
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().count("\n") >= n:
            return
        assert proc.poll() is None, "the run ended before it could be stopped"
        time.sleep(0.05)
    raise AssertionError("the run made no progress")


@needs_openai
def test_resume_after_a_kill_finishes_the_rest_without_repeating_one(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with ScriptedChatServer(_seeded_reply, delay=0.05) as server:
        proc = _subprocess_eval(run, server.url)
        _wait_for_lines(run, 15, proc)
        proc.kill()
        proc.communicate(timeout=10)
        before = _lines(run)
        assert 15 <= len(before) < 58
        assert main(
            ["eval", *FIVE_ENVS, "--model", "m", "--base-url", server.url, "--quiet",
             "--out", str(run), "--tasks", "6", "--limit", "6", "--n", "2", "--resume"]
        ) == 0  # fmt: skip
    after = _lines(run)
    keys = collections.Counter((r["env"], r["task"], r["sample"]) for r in after)
    assert len(keys) == 58 and set(keys.values()) == {1}  # none repeated, none missing
    assert after[: len(before)] == before
    summary = json.loads((run / "summary.json").read_text())
    assert summary["summary"]["overall"]["scored"] == 58
    assert summary["run"]["last_session"]["resumed_from"] == len(before)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@needs_openai
def test_ctrl_c_writes_what_finished(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # slow replies: the whole run takes ~10 s, so it cannot finish before the signal lands
    with ScriptedChatServer(_seeded_reply, delay=0.2) as server:
        proc = _subprocess_eval(run, server.url)
        _wait_for_lines(run, 10, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    written = _lines(run)
    assert summary["summary"]["overall"]["episodes"] == len(written) >= 10
    assert "--resume" in err.decode()
    assert (run / "report.md").is_file() and (run / "report.html").is_file()


def test_rerun_without_resume_refuses_to_overwrite(tmp_path: Path, capsys: Any) -> None:
    args = ["eval", "game:GuessTheNumber-v0-easy", "--agent", "oracle", "--tasks", "2",
            "--quiet", "--out", str(tmp_path / "a")]  # fmt: skip
    assert main(args) == 0
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0  # nothing left to play
    assert len(_lines(tmp_path / "a")) == 2
    assert main([*args[:-2], "--out", str(tmp_path / "a"), "--resume", "--seed", "5"]) == 2


@needs_openai
def test_gemgym_run_says_a_hung_server_did_not_answer(capsys: Any) -> None:
    with ScriptedChatServer(hang_rate=1.0) as server:
        status = main(
            ["run", "game:GuessTheNumber-v0-easy", "--agent", "openai", "--model", "m",
             "--base-url", server.url, "--episodes", "1", "--timeout", "0.3",
             "--max-retries", "0", "--quiet"]
        )  # fmt: skip
    assert status == 2
    err = capsys.readouterr().err
    assert "did not answer within 0.3 s" in err and "cannot reach" not in err
