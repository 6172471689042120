"""The env loops of GEM's trainer examples (rl2, OpenRLHF) and tests (vector envs, debug helpers),
written as those files write them, on the layer."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import numpy as np
import pytest

import gemgym.compat.gem as gem
from gemgym.compat.gem.utils.debug import (
    run_and_print_episode,
    run_and_print_episode_with_random_selection,
)
from gemgym.compat.gem.wrappers.wrapper_factory import WRAPPER_FACTORY, get_wrapper_fns
from helpers.extras import needs_module

NUM_ENVS = 4
GAME = "game:GuessTheNumber-v0-hard"


def _template(observation: str) -> str:
    return f"<|im_start|>user\nQuestion: {observation}<|im_end|>\n<|im_start|>assistant\n"


class Rl2EnvFunctions:
    """rl2's async env functions (examples/train_rl2/async_multi_turn.py): a pool of envs made
    with ``gem.make(env_id=..., seed=...)`` and wrappers by name, one asyncio lock per env."""

    def __init__(self, game: str, wrappers: str) -> None:
        self.pool = []
        for i in range(NUM_ENVS):
            env = gem.make(env_id=game, seed=233 + i)
            for wrapper in get_wrapper_fns(wrappers, tokenizer=None):
                env = wrapper(env)
            self.pool.append(env)
        self.locks = [asyncio.Lock() for _ in range(NUM_ENVS)]

    async def reset(self, extra_info: dict[str, Any]) -> str:
        idx = extra_info["idx"] % NUM_ENVS
        await self.locks[idx].acquire()
        observation, _ = self.pool[idx].reset()
        return _template(observation)

    async def step(self, state: str, action: str, extra_info: dict[str, Any]) -> dict[str, Any]:
        idx = extra_info["idx"] % NUM_ENVS
        next_obs, reward, terminated, truncated, info = self.pool[idx].step(action)
        done = terminated or truncated
        if done:
            self.locks[idx].release()
        return {
            "next_state": _template(next_obs),
            "reward": float(reward),
            "done": done,
            "extra_info": info,
        }


@pytest.mark.parametrize(("game", "wrappers"), [(GAME, "concat"), ("rg:letter_counting", "")])
def test_rl2_async_env_functions(game: str, wrappers: str) -> None:
    if game.startswith("rg:"):
        needs_module("reasoning_gym", "rg")
    funcs = Rl2EnvFunctions(game, wrappers)

    async def episode(idx: int) -> tuple[int, float, str]:
        rng = random.Random(idx)
        state = await funcs.reset({"idx": idx})
        total, steps, done = 0.0, 0, False
        while not done:
            out = await funcs.step(state, f"\\boxed{{{rng.randint(1, 50)}}}", {"idx": idx})
            state, done = out["next_state"], out["done"]
            total += out["reward"]
            steps += 1
        return steps, total, state

    async def main() -> list[tuple[int, float, str]]:
        return await asyncio.gather(*(episode(i) for i in range(2 * NUM_ENVS)))

    results = asyncio.run(main())
    assert len(results) == 2 * NUM_ENVS
    if game == GAME:
        assert all(1 <= steps <= 7 for steps, _, _ in results)  # the hard preset's 7 turns
        # the concat wrapper keeps the whole game in the observation
        assert all(state.count("At turn") >= steps - 1 for steps, _, state in results)
    else:
        assert all(steps == 1 for steps, _, _ in results)


class OpenRlhfAgentInstance:
    """The env side of examples/train_openrlhf/agent_func_multi_turn_*.py."""

    def __init__(self) -> None:
        self.step_idx = 0
        self.env = gem.make(GAME, seed=time.time_ns())
        self.max_steps = self.env.max_turns

    def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, str]:
        rng = random.Random(kwargs.get("seed", time.time_ns()))
        observation, info = self.env.reset(rng.randint(1, 10000000))  # a positional seed
        self.step_idx = 0
        return {"observation": states["observation"]}

    def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, reward, terminated, truncated, info = self.env.step(states["action_text"])
        reward = max(reward, -1.0)
        done = terminated or truncated
        self.step_idx += 1
        if not done:
            obs = f"<|im_start|>user\n{obs}\nEnter your next guess.<|im_end|>\n"
        return {"rewards": reward, "environment_feedback": obs, "done": done}


def test_openrlhf_agent_instance_loop() -> None:
    agent = OpenRlhfAgentInstance()
    assert agent.max_steps == 7
    for k in range(3):
        agent.reset({"observation": "prompt"}, seed=k)
        done, guesses = False, iter(range(1, 51))
        while not done:
            out = agent.step({"action_text": f"\\boxed{{{next(guesses)}}}"})
            done = out["done"]
            assert isinstance(out["environment_feedback"], str)
        assert agent.step_idx <= agent.max_steps


def test_make_vec_with_vec_kwargs_seeds_and_dict_actions() -> None:
    ids = [GAME] * 3
    a = gem.make_vec(ids, vec_kwargs=[{"seed": 42 + i} for i in range(3)], max_turns=4)
    b = gem.make_vec(ids, vec_kwargs=[{"seed": 42 + i} for i in range(3)], max_turns=4)
    try:
        assert a.reset()[0] == b.reset()[0]
        obs, rewards, terminated, truncated, infos = a.step({0: r"\boxed{10}", 2: r"\boxed{20}"})
        assert len(obs) == len(infos) == 2 and isinstance(rewards, np.ndarray)
        assert a.envs[0].max_turns == 4
    finally:
        a.close()
        b.close()


def test_make_vec_async_with_wrappers_like_gems_test_game(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = ["game:GuessTheNumber-v0-easy", "game:Sokoban-v0-easy", "game:Game2048-v0-easy"]
    venv = gem.make_vec(ids, wrappers=[WRAPPER_FACTORY["concat"]], max_turns=3, async_mode=True)
    try:
        assert type(venv).__name__ == "AsyncVectorEnv"
        run_and_print_episode_with_random_selection(
            venv,
            lambda _: [venv.envs[i].env.sample_random_action() for i in range(3)],
            ignore_done=True,
            max_steps=5,
        )
        assert capsys.readouterr().out.count("Step ") == 5
    finally:
        venv.close()


def test_run_and_print_episode_on_a_reasoning_gym_vector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    needs_module("reasoning_gym", "rg")
    env = gem.make("rg:leg_counting", seed=10, size=int(1e9))
    run_and_print_episode(env, lambda _: "\\boxed{30}")
    venv = gem.make_vec(
        ["rg:leg_counting"] * 2, vec_kwargs=[{"seed": 42}, {"seed": 43}], size=int(1e9)
    )
    try:
        run_and_print_episode(venv, lambda _: ["\\boxed{30}"] * 2, ignore_done=True, max_steps=3)
    finally:
        venv.close()
    out = capsys.readouterr().out
    assert out.count("Step 1") == 2 and "Step 3" in out


def test_episode_tracking_and_chat_on_reset_wrappers() -> None:
    class Tok:
        def apply_chat_template(self, messages: Any, **kwargs: Any) -> str:
            return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    env = gem.make(GAME, seed=0)
    env = WRAPPER_FACTORY["concat_chat_on_reset"](env, tokenizer=Tok())
    env = WRAPPER_FACTORY["episode_tracking"](env)
    obs, info = env.reset()
    assert obs.startswith("<user>") and info["prev_ep_step_counter"] == 0
    obs, reward, *_, info = env.step(r"\boxed{10}")
    assert obs.startswith("<user>") and r"\boxed{10}" in obs
    assert info["step_counter"] == 1 and info["cumulative_rewards"] == reward
    with pytest.raises(ValueError, match="tokenizer"):
        WRAPPER_FACTORY["concat_chat"](gem.make(GAME))


def test_make_vec_keeps_gems_qa_reward() -> None:
    venv = gem.make_vec(["qa:NaturalQuestions"] * 2, dataset="sample")
    try:
        venv.reset()
        _, rewards, terminated, _, _ = venv.step(["no answer here", "<answer>x</answer>"])
        assert list(rewards) == [0.0, 0.0] and all(terminated)
    finally:
        venv.close()
