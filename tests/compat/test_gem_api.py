"""GEM's API through gemgym.compat.gem: kwargs, attributes, positional seeds, custom envs."""

from __future__ import annotations

import random
import string
import warnings
from typing import Any

import pytest

import gemgym
import gemgym.compat.gem as gem
from gemgym.compat.gem import GemCompatWarning
from gemgym.compat.gem.core import Env
from gemgym.compat.gem.envs.registration import ENV_REGISTRY, register
from gemgym.compat.gem.utils.constants import TERMINAL_STATE
from gemgym.compat.gem.utils.parsing import extract_last_boxed_answer
from gemgym.errors import UnknownParameterError
from helpers.extras import needs_module


def test_unknown_kwargs_are_ignored_with_one_warning_each() -> None:
    with pytest.warns(GemCompatWarning, match="'verbose'") as record:
        env = gem.make("game:GuessTheNumber-v0-hard", verbose=True, max_turns=5)
    assert len(record) == 1
    assert env.max_turns == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second time: no warning
        gem.make("game:GuessTheNumber-v0-hard", verbose=True)
    # gemgym's own API stays strict
    with pytest.raises(UnknownParameterError, match="verbose"):
        gemgym.make("game:GuessTheNumber-v0-hard", verbose=True)


def test_the_warning_points_at_the_callers_line() -> None:
    with pytest.warns(GemCompatWarning) as record:
        gem.make("game:GuessTheNumber-v0-easy", load_from_cache_file=False)
    assert record[0].filename == __file__


def test_seed_kwarg_seeds_the_first_reset_and_positional_seeds_work() -> None:
    a = gem.make("game:GuessTheNumber-v0-hard", seed=11)
    b = gem.make("game:GuessTheNumber-v0-hard", seed=11)
    c = gem.make("game:GuessTheNumber-v0-hard")
    obs_a, _ = a.reset()
    assert obs_a == b.reset()[0] == c.reset(11)[0]
    for action in (r"\boxed{25}", r"\boxed{12}"):
        assert a.step(action)[:4] == c.step(action)[:4]
    assert a.reset(3)[0] == b.reset(seed=3)[0]


def test_reasoning_gym_seed_is_the_dataset_seed() -> None:
    needs_module("reasoning_gym", "rg")
    env = gem.make("rg:leg_counting", seed=10, size=int(1e9))
    assert env.unwrapped.gemgym_env.unwrapped.dataset_seed == 10
    obs, _ = env.reset()
    assert isinstance(obs, str) and obs


def test_the_returned_env_shows_the_envs_attributes() -> None:
    env = gem.make("qa:NaturalQuestions", dataset="sample")
    assert env.env_id == "qa:NaturalQuestions"
    env.reset(0)
    item = env.gemgym_env.unwrapped.item
    assert env.answer == item["answer"] and env.question == item["question"]
    assert len(env.dataset) == len(env.gemgym_env.unwrapped)
    game = gem.make("game:FifteenPuzzle-v0-easy")
    assert (game.num_rows, game.max_turns) == (2, 10)
    game.max_turns = 12  # GEM code sets env state directly
    assert game.gemgym_env.unwrapped.max_turns == 12
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = game.nothing_here


def test_qa_no_answer_reward_is_gems() -> None:
    env = gem.make("qa:NaturalQuestions", dataset="sample")
    env.reset(0)
    _, reward, terminated, _, info = env.step("I have no idea.")
    assert (reward, terminated, info["format_error"]) == (0.0, True, True)
    native = gemgym.make("qa:NaturalQuestions", dataset="sample")
    native.reset(seed=0)
    assert native.step("I have no idea.")[1] == -0.1  # gemgym's own penalty is kept


def test_steps_after_the_end_are_tolerated() -> None:
    env = gem.make("game:GuessTheNumber-v0-easy", seed=0)
    env.reset()
    obs, reward, terminated, truncated, _ = env.step("no box at all")
    assert terminated
    again = env.step(r"\boxed{3}")
    assert again[0] == obs and again[1] == 0.0 and again[2] and again[4]["episode_over"]
    env.reset()
    assert not env.step(r"\boxed{3}")[4].get("episode_over")


def test_a_step_before_reset_starts_the_episode_as_gems_envs_do() -> None:
    env = gem.make("game:FifteenPuzzle-v0-easy")
    obs, reward, terminated, truncated, info = env.step(env.sample_random_action())
    assert isinstance(obs, str) and info.get("turn") == 1


class ReverseStringEnv(Env):
    """A GEM-style env: its own reset(seed) without options, global random, GEM's base class."""

    def __init__(self, str_len: int = 5) -> None:
        super().__init__()
        self.str_len = str_len
        self.gt_str = ""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.gt_str = "".join(random.choices(string.ascii_letters, k=self.str_len))
        return f"Reverse {self.gt_str}", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        answer = extract_last_boxed_answer(action)
        reward = float(answer is not None and answer[::-1] == self.gt_str)
        return TERMINAL_STATE, reward, True, True, {}


def test_gem_style_register_make_wrap_and_vectorise() -> None:
    register("game:ReverseString-v0-compat", ReverseStringEnv, str_len=4)
    try:
        assert "game:ReverseString-v0-compat" in ENV_REGISTRY
        with pytest.raises(ValueError, match="already registered"):
            register("game:ReverseString-v0-compat", ReverseStringEnv)
        env = gem.make("game:ReverseString-v0-compat")
        assert isinstance(env, ReverseStringEnv) and env.env_id == "game:ReverseString-v0-compat"
        obs, _ = env.reset(1)
        assert obs == env.reset(1)[0] and len(env.gt_str) == 4
        assert env.step("\\boxed{" + env.gt_str[::-1] + "}")[1] == 1.0

        from gemgym.compat.gem.wrappers.wrapper_factory import WRAPPER_FACTORY

        wrapped = WRAPPER_FACTORY["concat_with_action"](env)
        assert wrapped.env is env
        first, _ = wrapped.reset(2)
        nxt = wrapped.step(r"\boxed{abcd}")[0]
        assert nxt.startswith(first) and r"\boxed{abcd}" in nxt

        # GEM's make_vec passes seed=; an env that does not take it gets a warning, not an error
        with pytest.warns(GemCompatWarning, match="'seed'"):
            venv = gem.make_vec(["game:ReverseString-v0-compat"] * 2, async_mode=True)
        try:
            obs_list, _ = venv.reset(seed=5)
            assert len(obs_list) == 2
            _, rewards, terminated, truncated, _ = venv.step([r"\boxed{x}", r"\boxed{y}"])
            assert list(terminated) == [True, True] and list(rewards) == [0.0, 0.0]
        finally:
            venv.close()
    finally:
        dict.pop(ENV_REGISTRY, "game:ReverseString-v0-compat", None)


def test_unknown_ids_raise_gems_value_error() -> None:
    with pytest.raises(ValueError, match=r"not found in registry\..*GuessTheNumber-v0-hard"):
        gem.make("game:GuessTheNumber-v0-hadr")


def test_env_registry_lists_gemgyms_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert "game:Sudoku-v0-easy" in ENV_REGISTRY
    assert ENV_REGISTRY["math:GSM8K"].entry_point == "gemgym.envs.math:MathEnv"
    gem.print_envs()
    assert "game:Sudoku-v0-easy" in capsys.readouterr().out


def test_gem_env_classes_take_gems_constructor_keywords() -> None:
    from gemgym.compat.gem.envs.code_env import CodeEnv
    from gemgym.compat.gem.envs.game_env.fifteen_puzzle import FifteenPuzzleEnv
    from gemgym.compat.gem.envs.math_env import MathEnv

    rows = [{"problem": "1+1?", "solution": "2"}, {"problem": "2+2?", "solution": "4"}]
    with pytest.warns(GemCompatWarning, match="'use_mp'"):
        env = MathEnv(dataset=rows, question_key="problem", answer_key="solution", use_mp=False)
    env.reset(0)
    assert env.step("\\boxed{" + str(env.answer) + "}")[1] == 1.0
    puzzle = FifteenPuzzleEnv(max_turns=30, num_rows=3)
    assert puzzle.reset(0)[0] and puzzle.num_rows == 3
    assert issubclass(CodeEnv, gem.Env)


def test_fifteen_puzzle_exposes_gems_board_and_helpers() -> None:
    from gemgym.compat.gem.envs.game_env.fifteen_puzzle import FifteenPuzzleEnv

    env = FifteenPuzzleEnv(max_turns=100, num_rows=4, init_algo="monte_carlo", mc_rand_moves=20)
    goal = env._generate_goal_board()
    assert goal[3] == [13, 14, 15, None]
    assert env._is_solvable(env.board) and not env._is_solved()
    env.reset()
    env.board = [row[:] for row in goal]
    env.turn_count = 0
    assert env._is_solved() and env.blank_pos == (3, 3)
    assert not env._move("up") and not env._move("left")
    env.step(r"\boxed{down}")  # the tile above the empty cell comes down
    assert env.board[2][3] is None and env.board[3][3] == 12
    unsolvable = [row[:] for row in goal]
    unsolvable[3][1], unsolvable[3][2] = 15, 14
    assert not env._is_solvable(unsolvable)
    with pytest.raises(ValueError, match="init_algo"):
        FifteenPuzzleEnv(init_algo="magic")
    a = FifteenPuzzleEnv(num_rows=3, mc_rand_moves=30)
    b = FifteenPuzzleEnv(num_rows=3, mc_rand_moves=30)
    assert a.reset(4)[1]["suffix"] == b.reset(4)[1]["suffix"]  # seeded scramble


def test_gem_utils_on_gemgyms_graders() -> None:
    from gemgym.compat.gem.utils import math_grader, qa_em, seeding

    assert math_grader.boxed_reward_fn(r"so \boxed{\frac{1}{2}}", "0.5") == (
        {"formatted": True},
        1.0,
    )
    assert math_grader.boxed_reward_fn("no box", "0.5") == ({"formatted": False}, 0.0)
    assert math_grader.grade("2", "2.0")
    assert qa_em.em_check("The  Danube!", ["danube", "x"]) == 1
    assert qa_em.normalize_answer("The Danube") == "danube"
    a, seed = seeding.np_random(3)
    b, _ = seeding.np_random(3)
    assert seed == 3 and a.integers(1000) == b.integers(1000)
