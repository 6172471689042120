"""``gemgym eval --agent transformers``: the token-level layer's backend on a tiny random model
(made on the fly, no download), and the OpenAI-compatible path to the same kind of server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gemgym.cli import main
from helpers.extras import needs_module, needs_package

needs_module("transformers", "llm")
needs_module("tokenizers", "llm")


@pytest.mark.slow
def test_eval_with_the_transformers_backend(tmp_path: Path) -> None:
    from gemgym.llm.testing import build_tiny_chat_model

    model = build_tiny_chat_model(tmp_path / "tiny")
    run = tmp_path / "run"
    status = main(
        ["eval", "game:GuessTheNumber-v0-easy", "eval:AIME24", "--agent", "transformers",
         "--model", str(model), "--device", "cpu", "--tasks", "2", "--limit", "2", "--n", "2",
         "--max-tokens", "8", "--temperature", "1.0", "--quiet", "--out", str(run)]
    )  # fmt: skip
    assert status == 0
    records = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(r["status"] == "ok" for r in records)
    assert all(0 < r["usage"]["completion_tokens"] <= 8 * r["turns"] for r in records)
    assert all(r["usage"]["prompt_tokens"] > 0 for r in records)
    run_info = json.loads((run / "summary.json").read_text())["run"]
    assert run_info["agent"] == "transformers"


@pytest.mark.slow
def test_eval_against_transformers_serve_with_the_tiny_model(tmp_path: Path) -> None:
    """A real OpenAI-compatible server (``transformers serve``) with the tiny model."""
    needs_package("fastapi", '"transformers[serving]"')
    needs_package("uvicorn", '"transformers[serving]"')
    from gemgym.llm.testing import build_tiny_chat_model
    from helpers.net import transformers_serve

    if not Path(sys.executable).with_name("transformers").is_file():
        pytest.skip("no transformers command")
    model = build_tiny_chat_model(tmp_path / "tiny")
    with transformers_serve(model) as url:
        run = tmp_path / "run"
        status = main(
            ["eval", "game:GuessTheNumber-v0-easy", "game:Hangman-v0-easy", "eval:AIME24",
             "--model", str(model), "--base-url", f"{url}/v1", "--tasks", "2",
             "--limit", "2", "--n", "2", "--max-tokens", "8", "--concurrency", "4",
             "--timeout", "60", "--quiet", "--out", str(run)]
        )  # fmt: skip
    assert status == 0
    records = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 12 and all(r["status"] == "ok" for r in records)
    assert all(r["usage"]["prompt_tokens"] > 0 for r in records)
    assert (run / "report.html").is_file()


def test_eval_with_the_vllm_token_id_backend(tmp_path: Path) -> None:
    """``--agent vllm``: the conversation goes out as the chat template's token ids (the board
    included) and the reply's token ids come back (a scripted vLLM-style server on loopback)."""
    from transformers import AutoTokenizer

    from gemgym.llm.testing import build_tiny_chat_model
    from gemgym.registry import make
    from helpers.scripted_server import ScriptedChatServer

    model = build_tiny_chat_model(tmp_path / "tiny")
    tok = AutoTokenizer.from_pretrained(str(model))
    answer = tok.encode("\\boxed{e}", add_special_tokens=False)
    with ScriptedChatServer(reply_ids=lambda _body: answer) as server:
        status = main(
            ["eval", "game:Hangman-v0-easy", "--agent", "vllm", "--model", str(model),
             "--base-url", server.url, "--tasks", "2", "--max-turns", "2", "--quiet",
             "--out", str(tmp_path / "run")]
        )  # fmt: skip
        requests = list(server.requests)
    assert status == 0
    records = [
        json.loads(x) for x in (tmp_path / "run" / "episodes.jsonl").read_text().split("\n") if x
    ]
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert all(t["action"] == "\\boxed{e}" for r in records for t in r["transitions"])
    first = min(requests, key=lambda b: len(b["prompt"]))
    _, info = make("game:Hangman-v0-easy").reset(seed=0)
    board = info["suffix"].strip().splitlines()[1]  # a line of the grid
    assert board.strip() in tok.decode(first["prompt"])
