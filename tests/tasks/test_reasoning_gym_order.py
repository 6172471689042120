"""reasoning-gym envs are dataset envs: one seeded item order, one index option, str actions."""

from __future__ import annotations

import pickle

import pytest

import gemgym
from gemgym.envs.dataset import TERMINAL_STATE, DatasetEnv
from gemgym.envs.reasoning_gym import ReasoningGymEnv
from helpers.extras import needs_module

needs_module("reasoning_gym", "rg")


def _env(size: int = 7) -> ReasoningGymEnv:
    env = gemgym.make("rg:chain_sum", size=size).unwrapped
    assert isinstance(env, ReasoningGymEnv)
    return env


def test_reasoning_gym_uses_the_dataset_envs_order() -> None:
    env = _env()
    assert isinstance(env, DatasetEnv)
    served = [env.reset(seed=5)[1]["index"]] + [env.reset()[1]["index"] for _ in range(20)]
    assert served == [env.source.index_at(5, k) for k in range(21)]
    assert len(env) == 7


def test_the_index_option_is_the_dataset_envs() -> None:
    env = _env()
    obs, info = env.reset(options={"index": -1})  # as in every dataset env: the last item
    assert info["index"] == 6
    assert obs == env.reset(options={"index": 6})[0]
    with pytest.raises(gemgym.errors.ConfigError, match=r"options\['index'\]"):
        env.reset(options={"index": 7})


@pytest.mark.parametrize("action", [5, None, b"\\boxed{1}", {"content": "\\boxed{1}"}])
def test_a_non_string_action_is_a_format_error(action: object) -> None:
    """gemgym's one rule: a non-str action is the empty reply (never ``str(action)``)."""
    env = _env()
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step(action)  # type: ignore[arg-type]
    assert (obs, reward, term, trunc) == (TERMINAL_STATE, 0.0, True, False)
    assert info["format_error"] and info["non_text_action"] == type(action).__name__
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("no box")  # bad text: the same format error
    assert (obs, reward, term, trunc) == (TERMINAL_STATE, 0.0, True, False)
    assert info["format_error"] and info["index"] == env.item_index


def test_pickling_sends_the_task_key_and_gets_the_shared_dataset() -> None:
    env = _env()
    env.reset(seed=1)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.source is env.source  # the same process: the cached dataset object
    assert copy.step(env.expert_action())[1] == 1.0
