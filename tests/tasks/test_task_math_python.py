"""GEM's math-with-Python setting: a math env wrapped with the sandboxed Python tool."""

from __future__ import annotations

import gemgym
from gemgym.envs._dataset import TERMINAL_STATE
from gemgym.wrappers.tools import python_tool_wrapper


def test_math_with_python_tool_one_episode_end_to_end() -> None:
    env = gemgym.make("math:GSM8K", dataset="sample", wrappers=[python_tool_wrapper()])
    obs, info = env.reset(options={"index": 0})  # Janet's ducks: (16 - 3 - 4) * 2 = 18
    assert "Janet" in obs and "<python>" in obs
    obs, r, te, tr, info = env.step("Compute it.\n<python>print((16 - 3 - 4) * 2)</python>")
    assert info["use_tool"] is True and "18" in obs and (te, tr) == (False, False)
    assert r > 0  # GEM's tool rewards
    obs, r, te, tr, info = env.step(r"So she makes \boxed{18} dollars.")
    assert (obs, r, te, tr) == (TERMINAL_STATE, 1.0, True, False)
    assert info["correct"] is True
    env.close()
