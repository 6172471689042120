"""Issue 42: eval scores that can be trusted, and fail-fast against a broken model server.

Real HTTP on loopback (the scripted OpenAI-compatible server), never the network. Each test
fails on the code before the issue: context overflow and env crashes were unscored errors, no
error rate or refusal, --resume replayed errors forever and kept their old lines, no probe and
no circuit breaker, replies with no text were silent zeros, a failed request's tries were not
counted, --out that is a file and ``eval rescore --help`` gave a traceback / the main help.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

import gemgym
from gemgym.cli import main
from helpers.envs import FaultyEnv
from helpers.extras import needs_module, skip_without
from helpers.net import free_port
from helpers.scripted_server import ScriptedChatServer

needs_openai = skip_without("openai")  # the chat agent's HTTP client

GUESS = "game:GuessTheNumber-v0-easy"
FAULTY = "evaltest:FaultyOutcomes-v0"
gemgym.register(FAULTY, FaultyEnv, kwargs={"episode_length": 2}, override=True)
OVERFLOW = "This model's maximum context length is 64 tokens. However, you requested 80 tokens"


def _lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines() if x]


def _summary(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return data


def _eval(run: Path, url: str, *extra: str, env: str = GUESS) -> int:
    return main(
        ["eval", env, "--model", "m", "--base-url", url, "--quiet", "--out", str(run),
         "--retry-backoff", "0", *extra]
    )  # fmt: skip


@needs_openai
def test_context_overflow_is_a_scored_truncation(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> Any:  # a wrong guess, then the context is full
        if len(body["messages"]) >= 3:
            return {"status": 400, "error": OVERFLOW}
        return "\\boxed{0}"

    with ScriptedChatServer(reply) as server:
        assert _eval(tmp_path / "run", server.url, "--tasks", "4") == 0
    records = _lines(tmp_path / "run")
    assert len(records) == 4
    for r in records:
        assert (r["status"], r["finish_reason"], r["truncation"]) == ("ok", "truncation", "context")
        assert r["success"] is False and r["turns"] == 1 and r["requests"] == 2
    overall = _summary(tmp_path / "run")["summary"]["overall"]
    assert overall["errors"] == 0 and overall["scored"] == 4
    assert overall["context_truncations"] == 4 and overall["success_rate"] == 0.0


@needs_openai
def test_an_env_crash_on_the_reply_is_a_scored_env_error_reported_loudly(
    tmp_path: Path, capsys: Any
) -> None:
    with ScriptedChatServer(lambda body: "raise") as server:
        status = _eval(tmp_path / "run", server.url, "--tasks", "3", env=FAULTY)
    assert status == 0  # every episode scored: the score is trustworthy, the env is not
    records = _lines(tmp_path / "run")
    assert [r["status"] for r in records] == ["env_error"] * 3
    assert all(r["success"] is False and r["error_stage"] == "step" for r in records)
    overall = _summary(tmp_path / "run")["summary"]["overall"]
    assert overall["errors"] == 0 and overall["env_errors"] == 3 and overall["scored"] == 3
    assert overall["success_rate"] == 0.0 and not overall["refused"]
    err = capsys.readouterr().err
    assert "the env raised on the model's reply" in err and "FaultyEnv was asked to raise" in err
    assert "Env errors" in (tmp_path / "run" / "report.md").read_text()


@needs_openai
def test_the_error_rate_is_beside_every_score_and_a_score_is_refused_above_it(
    tmp_path: Path, capsys: Any
) -> None:
    def first_two_fail() -> Any:
        count = itertools.count()
        return lambda body: {"status": 500, "error": "boom"} if next(count) < 2 else "\\boxed{0}"

    args = ["--tasks", "10", "--concurrency", "1", "--max-retries", "0", "--max-turns", "1"]
    with ScriptedChatServer(first_two_fail()) as server:
        assert _eval(tmp_path / "a", server.url, *args) == 1
    out = capsys.readouterr()
    assert "error rate" in out.out and "20.0%" in out.out and "refused" in out.out
    assert "error: no score" in out.err and "--max-error-rate" in out.err
    summary = _summary(tmp_path / "a")["summary"]
    assert summary["overall"]["refused"] and summary["overall"]["error_rate"] == pytest.approx(0.2)
    assert summary["envs"][GUESS]["refused"]
    assert "refused" in (tmp_path / "a" / "report.md").read_text()
    # under a looser threshold the score is printed beside its error rate
    with ScriptedChatServer(first_two_fail()) as server:
        assert _eval(tmp_path / "b", server.url, *args, "--max-error-rate", "0.25") == 1
    out = capsys.readouterr()
    assert "refused" not in out.out and "20.0%" in out.out and "0.0%" in out.out
    assert not _summary(tmp_path / "b")["summary"]["overall"]["refused"]


@needs_openai
def test_resume_retries_errors_a_bounded_number_of_times_one_line_per_episode(
    tmp_path: Path, capsys: Any
) -> None:
    run = tmp_path / "run"
    args = ("--tasks", "3", "--max-retries", "2", "--max-attempts", "2")
    with ScriptedChatServer(fail_rate=1.0) as server:
        assert _eval(run, server.url, *args) == 1
        first = _lines(run)
        # every try of the request that finally failed is counted
        assert [r["requests"] for r in first] == [3, 3, 3]
        assert [r["attempt"] for r in first] == [1, 1, 1]
        assert _eval(run, server.url, *args, "--resume") == 1
        second = _lines(run)
        assert len(second) == 3 and [r["attempt"] for r in second] == [2, 2, 2]
        sent = len(server.requests)
        assert _eval(run, server.url, *args, "--resume") == 1  # at the cap: not played again
        assert len(server.requests) == sent
    assert "failed 2 times and are not played again" in capsys.readouterr().err
    with ScriptedChatServer() as server:
        assert _eval(run, server.url, *args[:-1], "3", "--resume") == 0
    final = _lines(run)
    assert len(final) == 3 and {r["status"] for r in final} == {"ok"}
    assert [r["attempt"] for r in final] == [3, 3, 3]


@needs_openai
def test_eval_against_a_server_that_is_down_exits_in_seconds_with_the_reason(
    tmp_path: Path, capsys: Any
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    t0 = time.monotonic()
    status = _eval(tmp_path / "run", url, "--tasks", "64")
    took = time.monotonic() - t0
    assert status != 0 and took < 10
    err = capsys.readouterr().err
    assert "cannot reach the LLM server" in err and "ConnectionRefusedError" in err
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


@pytest.mark.parametrize(
    ("server_kwargs", "message"),
    [
        ({"api_key": "right"}, "refused the API key (HTTP 401"),
        ({"models": ["served-model"]}, "does not serve model 'm'"),
    ],
)
@needs_openai
def test_a_refused_key_or_an_unknown_model_ends_the_run_before_any_episode(
    tmp_path: Path, capsys: Any, server_kwargs: dict[str, Any], message: str
) -> None:
    with ScriptedChatServer(**server_kwargs) as server:
        t0 = time.monotonic()
        status = _eval(tmp_path / "run", server.url, "--tasks", "64")
        assert time.monotonic() - t0 < 10
        chats = [r for r in server.requests if "seed" in r]  # episode turns carry a seed
    assert status == 2 and not chats
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    if "models" in server_kwargs:
        assert "served-model" in err  # what the server does serve


@needs_openai
def test_a_server_with_no_such_route_ends_the_run_naming_base_url(
    tmp_path: Path, capsys: Any
) -> None:
    """A base_url without /v1: GET /models and every chat request are 404 (nothing listed)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    posts: list[str] = []

    class NoRoute(BaseHTTPRequestHandler):
        def _404(self) -> None:
            body = b'{"detail": "Not Found"}'
            self.send_response(404)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._404()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            posts.append(self.path)
            self._404()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoRoute)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        t0 = time.monotonic()
        status = _eval(tmp_path / "run", url, "--tasks", "16")
        assert time.monotonic() - t0 < 10
    finally:
        server.shutdown()
        server.server_close()
    assert status == 2 and posts == ["/chat/completions"]  # the probe's, no episode's
    err = capsys.readouterr().err
    assert "answered HTTP 404 to GET /models and to a chat request" in err
    assert "check base_url (--base-url), which usually ends in /v1" in err and err.count("\n") == 1


@needs_openai
def test_a_circuit_breaker_stops_hammering_a_dead_server(tmp_path: Path, capsys: Any) -> None:
    run = tmp_path / "run"
    args = ("--tasks", "40", "--concurrency", "2", "--max-retries", "1")
    with ScriptedChatServer(fail_rate=1.0) as server:
        assert _eval(run, server.url, *args) == 1
        sent = len(server.requests)
    assert sent <= 2 * (5 + 2)  # 5 failed requests in a row (2 tries each), then it stops
    err = capsys.readouterr().err
    assert "stopped the run after 5 model requests in a row failed" in err and "HTTP 500" in err
    assert "--resume" in err
    assert _summary(run)["run"]["status"] == "stopped"
    assert len(_lines(run)) < 10
    with ScriptedChatServer() as server:  # the server is back: the rest is played
        assert _eval(run, server.url, *args, "--resume") == 0
    assert len(_lines(run)) == 40


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"content": None, "reasoning_content": "Let me think...", "finish_reason": "length"},
         "reasoning only"),
        ({"content": "", "finish_reason": "length"}, "cut by max_tokens"),
    ],
)  # fmt: skip
@needs_openai
def test_replies_with_no_text_are_scored_with_a_warning(
    tmp_path: Path, capsys: Any, message: dict[str, Any], expected: str
) -> None:
    with ScriptedChatServer(lambda body: dict(message)) as server:
        assert _eval(tmp_path / "run", server.url, "--tasks", "2", "--max-turns", "1") == 0
    records = _lines(tmp_path / "run")
    assert all(r["status"] == "ok" and r["success"] is False for r in records)
    assert all(len(r["warnings"]) == 1 and expected in r["warnings"][0] for r in records)
    assert _summary(tmp_path / "run")["summary"]["overall"]["warnings"] == 2
    err = capsys.readouterr().err
    assert "2 replies had no text" in err and expected in err


def test_out_that_is_a_file_or_cannot_be_written_is_a_one_line_error(
    tmp_path: Path, capsys: Any
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    base = ["eval", GUESS, "--agent", "oracle", "--tasks", "1", "--quiet"]
    assert main([*base, "--out", str(afile)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main([*base, "--out", str(afile / "sub")]) == 2
    err = capsys.readouterr().err
    assert "cannot write the run folder" in err and err.count("\n") == 1


@pytest.mark.parametrize(("word", "usage"), [("rescore", "RUN"), ("compare", "RUN_A RUN_B")])
def test_eval_rescore_and_compare_have_their_own_help(capsys: Any, word: str, usage: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["eval", word, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: gemgym eval {word} {usage}\n")
    assert "--max-tokens" not in out  # not the main eval help


def test_oracle_on_an_env_without_an_expert_is_a_one_line_error(
    tmp_path: Path, capsys: Any
) -> None:
    needs_module("textarena", "ta")
    args = ["ta:GuessTheNumber-v0", "--agent", "oracle", "--quiet"]
    assert main(["eval", *args, "--tasks", "1", "--out", str(tmp_path / "run")]) == 2
    assert main(["run", *args, "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("so --agent oracle cannot play it") == 2 and err.count("\n") == 2
