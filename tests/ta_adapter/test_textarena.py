"""The TextArena bridge: ids listed without TextArena, per-instance seeding, PettingZoo's tests
and garbage actions over every ``ta:*`` id (``check_env`` runs in tests/test_conformance.py)."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest

import gemgym
import gemgym.multiagent as ma
from gemgym.envs._ta_games import TA_GAMES, TA_SKIPPED
from helpers.extras import needs_module

TA_IDS = gemgym.list_envs("ta:*")
MULTI_IDS = ma.list_games("ta:*")
GARBAGE: list[Any] = ["", "hello", "[]", "[" * 50, "ünïcödé [✓]", "x" * 10_000, 12, None]


def test_ids_listed_without_importing_textarena() -> None:
    code = (
        "import sys, gemgym; ids = gemgym.list_envs('ta:*'); "
        "assert 'textarena' not in sys.modules, 'imported textarena'; print(len(ids))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(TA_GAMES) - len(set(TA_SKIPPED) & set(TA_GAMES)) > 100


def test_every_listed_game_is_registered_or_skipped_with_a_reason() -> None:
    registered = {i.removeprefix("ta:") for i in TA_IDS}
    assert registered == set(TA_GAMES) - set(TA_SKIPPED)
    assert all(reason.strip() for reason in TA_SKIPPED.values())
    assert {"ta:TicTacToe-v0", "ta:KuhnPoker-v0"} <= set(MULTI_IDS)
    assert "ta:Sudoku-v0" in TA_IDS and "ta:Sudoku-v0" not in MULTI_IDS  # one player


textarena = needs_module("textarena", "ta")


def test_list_matches_installed_textarena() -> None:
    from textarena.envs.registration import ENV_REGISTRY

    assert set(TA_GAMES) | set(TA_SKIPPED) <= set(ENV_REGISTRY)


def test_seeded_per_instance_and_global_random_untouched() -> None:
    random.seed(123)
    before = random.getstate()
    a = gemgym.make("ta:Minesweeper-v0")
    b = gemgym.make("ta:Minesweeper-v0")
    obs_a, _ = a.reset(seed=5)
    obs_b, _ = b.reset(seed=5)
    assert obs_a == obs_b
    assert a.step("[0 0]")[:4] == b.step("[0 0]")[:4]
    assert random.getstate() == before
    a.reset(seed=6)
    assert a.reset(seed=5)[0] == obs_a  # reseeding the same instance replays the game


def test_multiplayer_game_forms() -> None:
    env = ma.make("ta:TicTacToe-v0")
    env.reset(seed=0)
    first = env.agent_selection
    obs, *_ = env.last()
    assert "Tic Tac Toe" in obs
    env.step("[4]")
    assert env.agent_selection != first
    single = gemgym.make("ta:TicTacToe-v0", opponent="random")
    obs, info = single.reset(seed=1)
    assert info["learner"] == "player_0" and isinstance(obs, str)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("env_id", MULTI_IDS)
def test_pettingzoo_api_and_seed(env_id: str) -> None:
    from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

    api_test(ma.make(env_id), num_cycles=30)
    seed_test(lambda: ma.make(env_id), num_cycles=30)
    parallel_api_test(ma.make_parallel(env_id), num_cycles=30)
    parallel_seed_test(lambda: ma.make_parallel(env_id), num_cycles=30)


@pytest.mark.parametrize("env_id", TA_IDS)
def test_garbage_actions(env_id: str) -> None:
    env = gemgym.make(env_id)
    env.reset(seed=1)
    for bad in GARBAGE * 3:
        obs, reward, terminated, truncated, _ = env.step(bad)
        assert isinstance(obs, str) and isinstance(reward, float)
        if terminated or truncated:
            break
    env.close()


@pytest.mark.integrity
def test_a_game_ended_by_invalid_moves_pays_nothing() -> None:
    """TextArena pays one-player games' completion when invalid moves end them: one guess and a
    repeat locked in partial credit (0.84 here) without playing on."""
    env = gemgym.make("ta:GuessTheNumber-v0")
    env.reset(seed=3)
    _, reward, terminated, _, _ = env.step("[5]")
    assert reward == 0.0 and not terminated
    total = 0.0
    for _ in range(3):
        obs, reward, terminated, truncated, _ = env.step("[5]")  # already guessed: invalid
        total += reward
        if terminated or truncated:
            break
    assert terminated and total <= 0.0
    assert "Invalid Move" in obs
    env.close()
