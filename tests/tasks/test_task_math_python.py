"""GEM's math-with-Python setting: a math env wrapped with the sandboxed Python tool."""

from __future__ import annotations

import pytest

import gemgym
from gemgym.envs.dataset import TERMINAL_STATE
from gemgym.wrappers.tools import python_tool_wrapper


def test_math_with_python_tool_one_episode_end_to_end() -> None:
    env = gemgym.make("math:GSM8K", dataset="sample", wrappers=[python_tool_wrapper()])
    obs, info = env.reset(options={"index": 0})  # Janet's ducks: (16 - 3 - 4) * 2 = 18
    assert "Janet" in obs and "<python>" in obs
    obs, r, te, tr, info = env.step("Compute it.\n<python>print((16 - 3 - 4) * 2)</python>")
    assert info["use_tool"] is True and "18" in obs and (te, tr) == (False, False)
    assert r == 0.0  # GEM's tool rewards (0.05 + 0.25), held until the episode is solved
    obs, r, te, tr, info = env.step(r"So she makes \boxed{18} dollars.")
    assert (obs, te, tr) == (TERMINAL_STATE, True, False) and r == pytest.approx(1.3)
    assert info["correct"] is True and info["tool_reward"] == pytest.approx(0.3)
    env.close()


@pytest.mark.integrity
def test_tool_calls_without_the_answer_earn_nothing() -> None:
    """GEM pays 0.3 per tool call whatever the answer: five empty calls beat solving (1.5)."""
    env = gemgym.make("math:GSM8K", dataset="sample", wrappers=[python_tool_wrapper()])
    env.reset(options={"index": 0})
    total, done = 0.0, False
    for _ in range(10):
        _, r, te, tr, _ = env.step("<python></python>")
        total += r
        if te or tr:
            done = True
            break
    if not done:
        _, r, te, tr, _ = env.step(r"\boxed{0}")
        total += r
    assert total <= 0.0
    env.close()
