"""The games' shared episode structure (``GameEnv.step``), argument checks and action types."""

from __future__ import annotations

import re
from typing import Any

import pytest

import gemgym
from gemgym.envs.games._common import (
    FORMAT_ERROR_REWARD,
    TURN_LIMIT_TEXT,
    GameConfig,
    GameEnv,
)
from gemgym.errors import ConfigError

# The games on the shared template. WikiGame keeps GEM's own step rules (a format error costs
# -0.2 and the episode goes on; tests/games/test_wikigame.py), so it is not one of them.
GAME_IDS = sorted(i for i in gemgym.list_envs("game:*") if not i.startswith("game:WikiGame"))


def _game(env_id: str, **kwargs: Any) -> GameEnv[Any]:
    env = gemgym.make(env_id, **kwargs).unwrapped
    assert isinstance(env, GameEnv)
    return env


def test_every_game_uses_the_template_reset_and_step() -> None:
    assert len({i.split("-v0")[0] for i in GAME_IDS}) == 12
    for env_id in GAME_IDS:
        env = _game(env_id)
        assert type(env).step is GameEnv.step, env_id
        assert type(env).reset is GameEnv.reset, env_id


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize(
    "action", [5, None, b"\\boxed{up}", {"role": "assistant", "content": "\\boxed{1}"}, 2.5]
)
def test_a_non_string_action_is_a_format_error_naming_it(env_id: str, action: object) -> None:
    """gemgym's one rule for non-str actions: the empty reply (a format error), never coerced."""
    env = _game(env_id)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)  # type: ignore[arg-type]
    assert (reward, terminated, truncated) == (FORMAT_ERROR_REWARD, True, False)
    assert info["format_error"] and info["non_text_action"] == type(action).__name__
    assert obs == f"At turn 1, your reply was not text (got {type(action).__name__})."
    # the same as the model's bad text: a format error, scored and ending the episode
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("no box here")
    assert (reward, terminated, truncated) == (FORMAT_ERROR_REWARD, True, False)
    assert info["format_error"] and obs.startswith("At turn 1, ")
    assert "non_text_action" not in info


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_a_bad_max_turns_names_the_parameter(env_id: str) -> None:
    with pytest.raises(ConfigError, match=r"max_turns must be an int or None, got 'five'"):
        gemgym.make(env_id, max_turns="five")
    with pytest.raises(ConfigError, match="max_turns"):
        gemgym.make(env_id, max_turns=2.5)
    with pytest.raises(ConfigError, match="max_turns"):
        gemgym.make(env_id, max_turns=True)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        ("game:GuessTheNumber-v0-easy", {"min_number": "1"}, "min_number must be an int or None"),
        ("game:GuessTheNumber-v0-easy", {"partial_credit": "no"}, "partial_credit must be a bool"),
        ("game:Hangman-v0-easy", {"word_length": "3"}, "word_length must be an int or None"),
        ("game:Hangman-v0-easy", {"hardcore": "yes"}, "hardcore must be a bool"),
        ("game:Wordle-v0-easy", {"only_real_words": 1}, "only_real_words must be a bool"),
        ("game:Mastermind-v0-easy", {"num_numbers": "6"}, "num_numbers must be an int or None"),
        ("game:Game2048-v0-easy", {"board_size": None}, "board_size must be an int"),
        ("game:Sokoban-v0-easy", {"dim_room": "66"}, "dim_room must be a tuple of 2 ints or None"),
        ("game:Sokoban-v0-easy", {"dim_room": (6, 6, 6)}, "dim_room must be a tuple of 2 ints"),
        ("game:Sudoku-v0-easy", {"scale": "4"}, "scale must be an int or None"),
        ("game:Crosswords-v0-easy", {"num_words": [3]}, "num_words must be an int or None"),
        ("game:WordSearch-v0-easy", {"hardcore": 0}, "hardcore must be a bool or None"),
        ("game:Minesweeper-v0-easy", {"rows": 5.0}, "rows must be an int or None"),
        ("game:TowerofHanoi-v0-easy", {"num_disks": "3"}, "num_disks must be an int or None"),
        ("game:FifteenPuzzle-v0-easy", {"num_rows": "2"}, "num_rows must be an int or None"),
    ],
)
def test_bad_argument_types_name_the_parameter(
    env_id: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        gemgym.make(env_id, **kwargs)


def test_good_argument_types_still_work() -> None:
    import numpy as np

    env = _game("game:Sokoban-v0-easy", dim_room=[6, 6])  # a list, as JSON gives it
    assert env.reset(seed=0)[0]
    env = _game("game:TowerofHanoi-v0-easy", max_turns=np.int64(5))
    env.reset(seed=0)
    assert env.max_turns == 5


class _Count(GameEnv[int]):
    """A tiny game: say ``\\boxed{3}``; ``\\boxed{0}`` loses; reward 0.1 a wrong number."""

    format_error_detail = "you gave no number"

    def __init__(self, max_turns: int = 2) -> None:
        self.max_turns = max_turns

    def start_episode(self) -> str:
        return "Say 3."

    def parse_move(self, action: str) -> int | None:
        found = re.findall(r"\\boxed\{(\d+)\}", action)
        return int(found[-1]) if found else None

    def play_move(self, move: int) -> tuple[str, float, bool | None]:
        if move == 3:
            return "won", 1.0, True
        if move == 0:
            return "lost", 0.0, False
        return f"turn {self.turn_count}: not {move}", 0.1, None

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        return f"{obs} / out of turns", 0.5


def test_the_template_hooks() -> None:
    env = _Count()
    env.turn_count = 5
    assert env.reset(seed=0) == ("Say 3.", {"suffix": ""}) and env.turn_count == 0
    assert env.step("\\boxed{1}") == ("turn 1: not 1", 0.1, False, False, {"suffix": "", "turn": 1})
    last = env.step("\\boxed{2}")  # the turn limit: truncated only, with the hook's credit
    assert last == (
        "turn 2: not 2 / out of turns",
        0.5,
        False,
        True,
        {"suffix": "", "turn": 2, "success": False, "turn_limit": True},
    )
    env.turn_count = 1  # a win or a loss at the last turn is not also truncated
    assert env.step("\\boxed{3}")[1:] == (
        1.0,
        True,
        False,
        {"suffix": "", "turn": 2, "success": True},
    )
    env.turn_count = 1
    assert env.step("\\boxed{0}")[1:] == (
        0.0,
        True,
        False,
        {"suffix": "", "turn": 2, "success": False},
    )
    env.turn_count = 1
    obs, reward, term, trunc, info = env.step("none")
    assert (obs, reward, term, trunc) == (
        "At turn 2, you gave no number.",
        FORMAT_ERROR_REWARD,
        True,
        False,
    )
    assert info["format_error"]


def test_the_default_turn_limit_keeps_the_reward_and_appends_a_line() -> None:
    class Plain(_Count):
        turn_limit = GameEnv.turn_limit

    env = Plain(max_turns=1)
    env.reset(seed=0)
    obs, reward, term, trunc, _ = env.step("\\boxed{1}")
    assert (obs, reward, term, trunc) == (f"turn 1: not 1\n{TURN_LIMIT_TEXT}", 0.1, False, True)


def test_config_type_check_reads_the_annotations() -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Conf(GameConfig):
        size: int = 3
        shape: tuple[int, int] | None = None
        flag: bool = False

    Conf(4, (1, 2), True)
    with pytest.raises(ConfigError, match=r"size must be an int, got '4' \(str\)"):
        Conf("4")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="shape must be a tuple of 2 ints or None"):
        Conf(4, (1, "2"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="flag must be a bool"):
        Conf(4, None, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_fixed_settings_live_only_in_the_config(env_id: str) -> None:
    env = _game(env_id)
    env.reset(seed=0)
    fixed = {"is_random", "hardcore", "only_real_words", "duplicate_numbers", "board_size"}
    if not env.is_random:  # a random preset draws hardcore (Crosswords, WordSearch) each episode
        assert not fixed & set(vars(env)), env_id
    assert env.is_random == env_id.endswith("-random")
    for name in fixed - {"is_random"}:
        if hasattr(env.config, name) and not env.is_random:
            assert getattr(env, name) == getattr(env.config, name)


def test_a_config_validates_itself() -> None:
    from gemgym.envs.games.hangman import HangmanConfig
    from gemgym.envs.games.mastermind import MastermindConfig

    with pytest.raises(ConfigError, match="word_length must be one of"):
        HangmanConfig(word_length=99)
    with pytest.raises(ConfigError, match="num_numbers >= 4"):
        MastermindConfig(code_length=4, num_numbers=3)


@pytest.mark.parametrize("env_id", sorted(gemgym.list_envs("game:*")))
def test_max_turns_is_checked_once_for_every_game(env_id: str) -> None:
    """GameConfig checks the field every game has, for fixed and random presets alike."""
    with pytest.raises(ConfigError, match=r"max_turns must be a positive int, got 0"):
        gemgym.make(env_id, max_turns=0)
    with pytest.raises(ConfigError, match=r"max_turns must be a positive int, got -3"):
        gemgym.make(env_id, max_turns=-3)


def test_max_turns_none_only_where_the_game_draws_or_derives_it() -> None:
    assert _game("game:Hangman-v0-easy", max_turns=None).max_turns == 10  # derived: 3 letters
    assert _game("game:GuessTheNumber-v0-random", max_turns=None).is_random
    with pytest.raises(ConfigError, match="max_turns must be a positive int when min_number"):
        gemgym.make("game:GuessTheNumber-v0-easy", max_turns=None)
    with pytest.raises(ConfigError, match=r"max_turns must be an int, got None"):
        gemgym.make("game:WikiGame-v0-easy", max_turns=None)


@pytest.mark.parametrize("game", sorted({i.split("-v0")[0] for i in GAME_IDS}))
def test_episode_settings_are_copied_from_the_config_once(game: str) -> None:
    """GameEnv.__init__ copies each episode setting; a random preset's draws replace them at reset,
    and every instance of a game has the same attributes in the same order."""
    fixed, drawn = _game(f"{game}-v0-easy"), _game(f"{game}-v0-random")
    assert "max_turns" in fixed.episode_settings
    for name in fixed.episode_settings:
        assert getattr(fixed, name) == getattr(fixed.config, name), name
        assert name in vars(fixed) and name in vars(drawn), name
    assert list(vars(fixed)) == list(vars(drawn))
    fixed.reset(seed=0)
    drawn.reset(seed=0)
    assert list(vars(fixed)) == list(vars(drawn))
    for name in fixed.episode_settings:
        assert getattr(fixed, name) == getattr(fixed.config, name), name
