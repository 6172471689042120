"""The board fix: what an LLM receives contains what ``gemgym play`` shows a human, per game.

Each test plays two turns of a game through ``gemgym run --agent openai`` (CLI -> rollout ->
experience.play -> OpenAIAgent) and through ``gemgym eval``, against a real OpenAI-compatible
server on loopback that records the requests, and plays the same moves in ``gemgym play``.
"""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from gemgym.cli import main
from gemgym.registry import make
from helpers.extras import skip_without
from helpers.scripted_server import ScriptedChatServer

needs_openai = skip_without("openai")  # the chat agent's HTTP client

GAMES = [
    "Crosswords",
    "FifteenPuzzle",
    "Game2048",
    "GuessTheNumber",
    "Hangman",
    "Mastermind",
    "Minesweeper",
    "Sokoban",
    "Sudoku",
    "TowerofHanoi",
    "WordSearch",
    "Wordle",
]
SEED = 3


def _moves(env_id: str, n: int) -> list[str]:
    """The expert's first ``n`` moves of the episode seeded ``SEED`` (it never ends in them)."""
    env = make(env_id)
    env.reset(seed=SEED)
    moves = []
    for _ in range(n):
        action = env.expert_action()
        moves.append(action)
        *_, terminated, truncated, _info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return moves


def _play_views(env_id: str, moves: list[str], monkeypatch: Any, capsys: Any) -> list[str]:
    """What ``gemgym play`` prints before each move (the reward line left out)."""
    capsys.readouterr()
    views: list[str] = []
    pending = list(moves)

    def fake_input(prompt: str = "") -> str:
        printed = capsys.readouterr().out
        views.append("\n".join(x for x in printed.splitlines() if not x.startswith("[reward")))
        if not pending:
            raise EOFError
        return pending.pop(0)

    monkeypatch.setattr(builtins, "input", fake_input)
    assert main(["play", env_id, "--seed", str(SEED)]) == 0
    return views[: len(moves)]


def _user_contents(requests: list[dict[str, Any]]) -> list[str]:
    return [str(r["messages"][-1]["content"]) for r in requests]


def _replier(moves: list[str]) -> Any:
    answers = iter(moves)
    return lambda _body: next(answers, "nothing")


@pytest.mark.parametrize("game", GAMES)
@needs_openai
def test_llm_request_shows_the_board_gemgym_play_shows(
    game: str, monkeypatch: Any, capsys: Any, tmp_path: Path
) -> None:
    env_id = f"game:{game}-v0-easy"
    moves = _moves(env_id, 2)
    views = _play_views(env_id, moves, monkeypatch, capsys)
    assert len(views) == len(moves) >= 1
    suffix_shown = make(env_id).reset(seed=SEED)[1].get("suffix")

    # gemgym run --agent openai (rollout -> experience.play -> OpenAIAgent)
    with ScriptedChatServer(_replier(moves)) as server:
        status = main(
            ["run", env_id, "--agent", "openai", "--model", "m", "--base-url", server.url,
             "--episodes", "1", "--seed", str(SEED), "--max-turns", str(len(moves)), "--quiet"]
        )  # fmt: skip
        assert status == 0
        run_requests = list(server.requests)
    # gemgym eval (its own async runner)
    with ScriptedChatServer(_replier(moves)) as server:
        status = main(
            ["eval", env_id, "--agent", "openai", "--model", "m", "--base-url", server.url,
             "--tasks", "1", "--seed", str(SEED), "--max-turns", str(len(moves)), "--quiet",
             "--out", str(tmp_path / "run")]
        )  # fmt: skip
        assert status == 0
        eval_requests = list(server.requests)

    for requests in (run_requests, eval_requests):
        contents = _user_contents(requests)
        assert len(contents) == len(moves)
        for view, content in zip(views, contents, strict=True):
            for line in view.splitlines():
                assert line in content, f"{game}: {line!r} shown by gemgym play is not sent"
        if suffix_shown:  # the board the env keeps in info["suffix"] reaches the model
            assert str(suffix_shown).strip().splitlines()[-1] in contents[0]
    record = json.loads((tmp_path / "run" / "episodes.jsonl").read_text().splitlines()[0])
    assert record["status"] == "ok"
