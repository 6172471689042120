"""Every registered env passes the public conformance checker (ids whose extra is not
installed are skipped, naming it)."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.testing import check_env
from helpers.extras import env_params

# The ids gemgym ships (their entry points are in the package); envs that other test modules
# register for themselves (evaltest:*, toy envs) are not part of the suite.
ALL_IDS = [
    i for i in gemgym.list_envs() if str(gemgym.registry.spec(i).entry_point).startswith("gemgym.")
]


def test_registry_is_not_empty() -> None:
    assert "game:GuessTheNumber-v0-easy" in ALL_IDS


@pytest.mark.parametrize("env_id", env_params(ALL_IDS))
def test_check_env(env_id: str) -> None:
    check_env(env_id)
