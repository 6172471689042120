"""PettingZoo's own API and seed tests pass on every multi-agent game (``ma:*`` and ``ta:*``
multi-player ids), in both the AEC and the Parallel form."""

from __future__ import annotations

import pytest

from helpers.extras import reason

pytest.importorskip("pettingzoo", reason=reason("multiagent", "could not import pettingzoo"))

from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

import gemgym.multiagent as ma

GAME_IDS = ma.list_games("ma:*")

# PettingZoo's checks warn that text observations are not numpy arrays and that Text spaces are
# neither Box nor Discrete: true of every text env, and not a failure of the API.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Observation is not a NumPy array"),
    pytest.mark.filterwarnings("ignore:Observation space for each agent probably"),
    pytest.mark.filterwarnings("ignore:Action space for each agent probably"),
]


def test_builtin_games_registered() -> None:
    assert {"ma:TicTacToe-v0", "ma:KuhnPoker-v0", "ma:Negotiation-v0"} <= set(GAME_IDS)


CHECKS = {
    "api_test": lambda gid: api_test(ma.make(gid), num_cycles=300),
    "seed_test": lambda gid: seed_test(lambda: ma.make(gid), num_cycles=300),
    "parallel_api_test": lambda gid: parallel_api_test(ma.make_parallel(gid), num_cycles=300),
    "parallel_seed_test": lambda gid: parallel_seed_test(
        lambda: ma.make_parallel(gid), num_cycles=300
    ),
}


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("game_id", GAME_IDS)
def test_pettingzoo_check(game_id: str, check: str) -> None:
    CHECKS[check](game_id)


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_is_a_pettingzoo_env(game_id: str) -> None:
    import pettingzoo

    assert isinstance(ma.make(game_id), pettingzoo.AECEnv)
    assert isinstance(ma.make_parallel(game_id), pettingzoo.ParallelEnv)
