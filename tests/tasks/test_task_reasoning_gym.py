"""reasoning-gym envs: the static task list, scoring of gold answers, determinism, laziness."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gemgym
from gemgym.envs.dataset import TERMINAL_STATE
from gemgym.envs.reasoning_gym import (
    GOLD_NOT_SCORING_ONE,
    RG_TASKS,
    WRONG_CAN_SCORE_ONE,
    ReasoningGymEnv,
)
from gemgym.errors import ConfigError
from helpers.extras import skip_without


@skip_without("rg")
def test_static_task_list_matches_installed_reasoning_gym() -> None:
    from reasoning_gym.factory import DATASETS

    assert sorted(DATASETS) == list(RG_TASKS), "run scripts/gen_rg_tasks.py"
    assert {f"rg:{t}" for t in RG_TASKS} <= set(gemgym.list_envs("rg:*"))


def test_listing_rg_ids_does_not_import_reasoning_gym() -> None:
    code = (
        "import sys, gemgym; ids = gemgym.list_envs('rg:*'); "
        "print(len(ids), 'reasoning_gym' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    n, imported = out.stdout.split()
    assert int(n) == len(RG_TASKS) and imported == "False"


@pytest.mark.parametrize("task", RG_TASKS)
def test_gold_scores_one_and_wrong_scores_below_one(task: str) -> None:
    env = gemgym.make(f"rg:{task}").unwrapped
    assert isinstance(env, ReasoningGymEnv)
    env.reset(seed=0)  # the item the conformance check generated (cached per process)
    obs, r, te, tr, info = env.step("answer: " + env.expert_action())
    assert (obs, te, tr) == (TERMINAL_STATE, True, False)
    if task in GOLD_NOT_SCORING_ONE:
        assert 0.0 <= r <= 1.0
    else:
        assert r == 1.0 and info["correct"], info
    env.reset(seed=0)
    wrong = env.step(r"\boxed{zzqx-not-an-answer}")[1]
    assert wrong == 1.0 if task in WRONG_CAN_SCORE_ONE else wrong < 1.0


def test_same_seed_same_items_in_two_envs_and_epochs_reshuffle() -> None:
    a = gemgym.make("rg:basic_arithmetic", size=6).unwrapped
    b = gemgym.make("rg:basic_arithmetic", size=6).unwrapped
    qa = [a.reset(seed=3)[0]] + [a.reset()[0] for _ in range(11)]
    qb = [b.reset(seed=3)[0]] + [b.reset()[0] for _ in range(11)]
    assert qa == qb
    assert sorted(qa[:6]) == sorted(qa[6:]) and qa[:6] != qa[6:]
    assert a.tasks() is b.tasks()  # one dataset object per (task, seed, size, config)


def test_fixed_index_no_box_and_bad_config() -> None:
    env = gemgym.make("rg:chain_sum")
    obs, info = env.reset(options={"index": 7})
    assert info["index"] == 7
    _, r, te, tr, info = env.step("42")
    assert (r, te, tr) == (0.0, True, False) and info["format_error"]
    with pytest.raises(ConfigError, match="did you mean"):
        ReasoningGymEnv(task="basic_arithmetc")
    with pytest.raises(ConfigError):
        ReasoningGymEnv(task="chain_sum", config={"no_such_option": 1})


def test_composite_mixes_configured_tasks() -> None:
    env = gemgym.make(
        "rg:composite",
        config={"datasets": [{"name": "chain_sum", "weight": 1.0, "config": {}}]},
        size=5,
    )
    env.reset(seed=0)
    assert env.step(env.expert_action())[1] == 1.0
