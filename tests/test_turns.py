"""One turn-limit rule for games, TimeLimit and ToolEnvWrapper (gemgym.turns.TurnCounter)."""

from __future__ import annotations

import pickle

import pytest

import gemgym
from gemgym.errors import ConfigError
from gemgym.tools import PythonTool
from gemgym.turns import TurnCounter, check_turn_limit
from gemgym.wrappers import TimeLimit, ToolEnvWrapper


def _play_to_the_end(env: gemgym.Env, action: str) -> tuple[int, bool, bool, dict]:
    env.reset(seed=0)
    steps = 0
    while True:
        steps += 1
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return steps, terminated, truncated, info


def test_counter_rule() -> None:
    turns = TurnCounter(limit=3)
    assert [turns.tick() for _ in range(3)] == [False, False, True] and turns.reached
    done = ("o", 1.0, True, False, {})
    assert turns.cut(done) is done  # a terminal state at the last turn wins
    assert turns.cut(("o", 0.0, False, False, {})) == ("o", 0.0, False, True, {"turn_limit": True})
    turns.restart()
    assert turns.count == 0 and not turns.reached
    assert pickle.loads(pickle.dumps(turns)).limit == 3
    unlimited = TurnCounter()
    assert not any(unlimited.tick() for _ in range(100))


@pytest.mark.parametrize("bad", [0, -1, "five", 2.0, True])
def test_limits_are_validated_with_the_parameter_named(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        check_turn_limit(bad)
    env = gemgym.make("game:GuessTheNumber-v0-hard")
    with pytest.raises(ConfigError, match="max_episode_steps"):
        TimeLimit(env, bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_turns"):
        ToolEnvWrapper(env, [PythonTool()], max_turns=bad)  # type: ignore[arg-type]


def test_every_layer_marks_its_truncation_the_same_way() -> None:
    # the game's own limit
    game = gemgym.make("game:GuessTheNumber-v0-hard", max_turns=3)
    steps, te, tr, info = _play_to_the_end(game, r"\boxed{1}")
    assert (steps, te, tr, info["turn_limit"]) == (3, False, True, True)
    # TimeLimit below the game's limit (also Gymnasium's key)
    limited = gemgym.make("game:GuessTheNumber-v0-hard", max_turns=10, max_episode_steps=2)
    steps, te, tr, info = _play_to_the_end(limited, r"\boxed{1}")
    assert (steps, te, tr, info["turn_limit"], info["TimeLimit.truncated"]) == (2, 0, 1, 1, 1)
    # ToolEnvWrapper: tool calls count toward the limit
    game = gemgym.make("game:GuessTheNumber-v0-hard", max_turns=10)
    tools = ToolEnvWrapper(game, [PythonTool()], max_turns=2)
    tools.reset(seed=0)
    tools.step("<python>print(1)</python>")
    _, _, te, tr, info = tools.step("<python>print(2)</python>")
    assert (te, tr, info["turn_limit"], tools.turn_count) == (False, True, True, 2)
    tools.close()
