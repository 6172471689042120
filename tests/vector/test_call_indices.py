"""``VectorEnv.call(..., indices=)`` calls only the chosen envs, on every backend."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.agents import OracleAgent
from gemgym.errors import ConfigError
from gemgym.experience import rollout

BACKENDS = ["sync", "thread", "process"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_on_chosen_envs_in_the_given_order(backend: str) -> None:
    with gemgym.make_vec(
        "game:Sudoku-v0-easy", 3, backend=backend, autoreset_mode="disabled"
    ) as venv:
        venv.reset(seed=1)
        everyone = venv.call("expert_action")
        assert venv.call("expert_action", indices=[2, 0]) == [everyone[2], everyone[0]]
        assert venv.call("expert_action", indices=[]) == []
        with pytest.raises(ConfigError, match="out of range"):
            venv.call("expert_action", indices=[3])
        with pytest.raises(ConfigError, match="out of range"):
            venv.call("expert_action", indices=[-1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_oracle_plays_a_game_whose_envs_end_at_different_times(backend: str) -> None:
    """Slots end their episodes at different times; the oracle asks only the running ones (a
    finished Sudoku's expert raises)."""
    expected = sorted(
        (e.to_dict() for e in rollout("game:Sudoku-v0-easy", OracleAgent(), episodes=3, seed=2)),
        key=lambda e: e["index"],
    )
    with gemgym.make_vec(
        "game:Sudoku-v0-easy", 2, backend=backend, autoreset_mode="disabled"
    ) as venv:
        got = sorted(
            (e.to_dict() for e in rollout(venv, OracleAgent(), episodes=3, seed=2)),
            key=lambda e: e["index"],
        )
    assert got == expected
    assert all(e["success"] for e in got)
