"""Every shipped terminal task: its reference solution earns 1, its wrong solution 0."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.envs.terminal.env import TerminalEnv
from gemgym.envs.terminal.loader import SHIPPED_TASKS, load_task, shipped_task_names
from gemgym.sandbox.bwrap import bwrap_available

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed")

TASKS = shipped_task_names()


def test_at_least_twenty_tasks_over_the_categories() -> None:
    assert len(TASKS) >= 20
    categories = {
        load_task(SHIPPED_TASKS / name).metadata["metadata"]["category"] for name in TASKS
    }
    assert {"files", "text-processing", "git", "python", "build", "debugging"} <= categories
    for name in TASKS:
        assert f"terminal:{name}" in gemgym.list_envs()
        assert load_task(SHIPPED_TASKS / name).wrong_solution is not None


def _play(env: TerminalEnv, action: str) -> tuple[float, dict[str, object]]:
    obs, reward, terminated, truncated, info = env.step(action)
    assert not (terminated or truncated), obs
    obs, reward, terminated, truncated, info = env.step("done")
    assert terminated and not truncated
    return reward, info


@pytest.mark.parametrize("name", TASKS)
def test_reference_passes_and_wrong_fails(name: str) -> None:
    missing = load_task(SHIPPED_TASKS / name).missing_tools()
    if missing:
        pytest.skip(f"{name} needs {missing} (scripts/test installs them)")
    with gemgym.make(f"terminal:{name}") as env:
        env.reset(seed=0)
        expert = env.unwrapped
        assert isinstance(expert, TerminalEnv)
        reward, info = _play(expert, expert.expert_action())
        assert reward == 1.0, info
        assert info["tests_passed"] == info["tests_total"] and info["fraction_passed"] == 1.0
        assert expert.expert_action() == "done"
        env.reset(seed=0)
        reward, info = _play(expert, expert.wrong_action())
        assert reward == 0.0, info
        assert isinstance(info["tests_total"], int) and info["tests_total"] >= 1
        assert info["fraction_passed"] < 1.0 and info["test_failures"]
