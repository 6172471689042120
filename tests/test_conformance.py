"""Every registered env passes the public conformance checker."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.testing import check_env

ALL_IDS = gemgym.list_envs()


def test_registry_is_not_empty() -> None:
    assert "game:GuessTheNumber-v0-easy" in ALL_IDS


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_check_env(env_id: str) -> None:
    check_env(env_id)
