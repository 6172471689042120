"""Issue 42: ``gemgym run --agent openai`` plays through the engine with eval's chat agent:
a failed request ends only its episode (the old agent aborted the whole run), the traces are
written as episodes end, ``--resume`` plays the missing and failed episodes and leaves one line
per episode, and a dead server is caught by the probe and by the circuit breaker. Real HTTP on
loopback (the scripted server)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gemgym.cli import main
from helpers.extras import needs_extra
from helpers.net import free_port
from helpers.scripted_server import ScriptedChatServer

needs_extra("openai")  # the chat agent's HTTP client

GUESS = "game:GuessTheNumber-v0-easy"


def _run(url: str, out: Path, *extra: str) -> int:
    return main(
        ["run", GUESS, "--agent", "openai", "--model", "m", "--base-url", url, "--quiet",
         "--out", str(out), "--retry-backoff", "0", "--max-turns", "1", *extra]
    )  # fmt: skip


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x]


def test_a_failed_request_ends_only_its_episode_and_resume_finishes_the_run(
    tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "t.jsonl"
    count = itertools.count()

    def first_fails(body: dict[str, Any]) -> Any:
        return {"status": 500, "error": "boom"} if next(count) == 0 else "\\boxed{3}"

    with ScriptedChatServer(first_fails) as server:
        status = _run(server.url, out, "--episodes", "6", "--concurrency", "1",
                      "--max-retries", "0")  # fmt: skip
    assert status == 2
    first = _lines(out)
    assert len(first) == 6  # the run went on past the failure
    failed = [r for r in first if r["finish_reason"] == "error"]
    assert len(failed) == 1 and "HTTP 500" in failed[0]["error"]
    assert failed[0]["usage"]["requests"] == 1
    assert "--resume" in capsys.readouterr().err
    with ScriptedChatServer("\\boxed{3}") as server:
        assert _run(server.url, out, "--episodes", "6", "--resume") == 0
        assert len([r for r in server.requests if "seed" in r]) == 1  # only the failed one
    final = _lines(out)
    assert [r["index"] for r in final] == list(range(6))  # one line per episode
    assert all(r["finish_reason"] != "error" for r in final)
    assert [r["seed"] for r in final] == list(range(6))


def test_retries_ride_out_a_flaky_server(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    with ScriptedChatServer("\\boxed{3}", fail_rate=0.3, seed=2) as server:
        status = _run(server.url, out, "--episodes", "12", "--max-retries", "6")
        assert server.counts["failed"] > 0
    assert status == 0
    assert all(r["finish_reason"] != "error" for r in _lines(out))


def test_resume_refuses_a_file_of_another_run(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "t.jsonl"
    with ScriptedChatServer("\\boxed{3}") as server:
        assert _run(server.url, out, "--episodes", "2") == 0
        assert _run(server.url, out, "--episodes", "2") == 2  # no silent overwrite
        assert "--resume" in capsys.readouterr().err
        assert _run(server.url, out, "--episodes", "2", "--resume", "--seed", "7") == 2
    assert "another run" in capsys.readouterr().err


def test_run_against_a_down_server_ends_in_seconds(tmp_path: Path, capsys: Any) -> None:
    t0 = time.monotonic()
    status = _run(f"http://127.0.0.1:{free_port()}/v1", tmp_path / "t.jsonl", "--episodes", "64")
    assert status == 2 and time.monotonic() - t0 < 10
    assert "cannot reach the LLM server" in capsys.readouterr().err


def test_the_circuit_breaker_stops_a_run_against_a_dead_server(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "t.jsonl"
    with ScriptedChatServer(fail_rate=1.0) as server:
        status = _run(server.url, out, "--episodes", "50", "--concurrency", "2",
                      "--max-retries", "0")  # fmt: skip
        sent = len(server.requests)
    assert status == 2 and sent <= 5 + 2
    err = capsys.readouterr().err
    assert "stopped the run after 5 model requests in a row failed" in err
    assert len(_lines(out)) < 10


def _default_sigint() -> None:  # as from a terminal (a background test run ignores SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_what_finished_and_resume_plays_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    with ScriptedChatServer("\\boxed{3}", delay=0.2) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gemgym", "run", GUESS, "--agent", "openai", "--model", "m",
             "--base-url", server.url, "--quiet", "--out", str(out), "--max-turns", "1",
             "--episodes", "40", "--concurrency", "2"],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_default_sigint,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (out.is_file() and out.read_text().count("\n") >= 4):
            assert proc.poll() is None, "the run ended before it could be stopped"
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert f"--resume --out {out}" in err.decode() and "Traceback" not in err.decode()
    kept = _lines(out)
    assert 4 <= len(kept) < 40 and len({r["index"] for r in kept}) == len(kept)
    with ScriptedChatServer("\\boxed{3}") as server:
        assert _run(server.url, out, "--episodes", "40", "--resume") == 0
        played = len([r for r in server.requests if "seed" in r])
    final = _lines(out)
    assert [r["index"] for r in final] == list(range(40))  # one line per episode
    assert played == 40 - len(kept)  # what finished before Ctrl-C is not played again
