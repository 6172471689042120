"""The conformance checker catches the mistakes it promises to catch."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gemgym import Env
from gemgym.testing import EnvCheckError, check_env


class Good(Env[str, str]):
    def __init__(self) -> None:
        self.t = 0
        self.target = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.target = self.rng.randint(0, 9)
        return f"guess 0-9 ({self.target % 2})", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.t += 1
        win = action == str(self.target)
        return ("yes" if win else "no"), float(win), win, (not win and self.t >= 5), {}

    def sample_random_action(self) -> str:
        return str(self.rng.randint(0, 9))


def test_a_good_env_passes() -> None:
    check_env(Good())


class GlobalRng(Good):
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.target = random.randint(0, 10**9)  # the global RNG: not reproducible
        return f"target {self.target}", {}


class BothFlags(Good):
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "over", 0.0, True, True, {}


class BadReward(Good):
    def step(self, action: str) -> tuple[str, Any, bool, bool, dict[str, Any]]:
        return "x", "one", False, False, {}


class BadInfo(Good):
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, Any]:
        super().reset(seed=seed)
        return "x", None


class BadRandomAction(Good):
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, r, te, tr, info = super().step(action)
        info["format_error"] = True
        return obs, r, te, tr, info


@pytest.mark.parametrize(
    ("env_cls", "message"),
    [
        (GlobalRng, "different first observations"),
        (BothFlags, "both true"),
        (BadReward, "reward must be a number"),
        (BadInfo, "info: dict"),
        (BadRandomAction, "sample_random_action"),
    ],
)
def test_broken_envs_fail_with_a_reason(env_cls: type[Env[str, str]], message: str) -> None:
    with pytest.raises(EnvCheckError, match=message):
        check_env(env_cls())
