r"""GuessTheNumber: find a hidden integer from "higher"/"lower" hints.

============  =================================================================================
ids           ``game:GuessTheNumber-v0-easy`` (1–10, 4 turns), ``game:GuessTheNumber-v0-hard``
              (1–50, 7 turns), ``game:GuessTheNumber-v0-random`` (each episode: min in 1–10,
              max in min+5–min+50, turns = ceil(sqrt(max-min)) + 1)
observation   reset: the rules; step: ``"At turn 2, you guessed 25, and the target number is
              higher than 25."``; ``info["suffix"]`` = ``"Enter your next guess."``
action        any text; the last ``\boxed{N}`` (an integer, ``0`` and negatives included) is the guess
reward        correct guess: 1.0 and ``terminated``; wrong, out-of-range or repeated guess: 0.0;
              no ``\boxed{N}``: −0.1 and ``terminated`` (format error); at the turn limit without
              success: ``truncated`` with partial credit ``1 − |guess − target| / (max − min)``
              for a new in-range last guess (0 for an invalid one, out of range or repeated;
              0 always with ``partial_credit=False``)
expert        binary search over the interval the hints leave open (solves every preset)
kwargs        ``min_number``, ``max_number``, ``max_turns``; ``partial_credit`` (default ``True``, as
              GEM): ``make("game:GuessTheNumber-v0-easy", partial_credit=False)`` pays only wins
============  =================================================================================

Differences from upstream GEM (bugs fixed): randomness is per env (``reset(seed=)``), ``\boxed{0}``
is a number rather than a format error, a format error at the last turn is not also truncated,
and the turn limit ends the episode with ``truncated=True`` only (never both flags). Partial
credit is never negative (GEM gave negative rewards to far out-of-range last guesses), and a
repeated last guess is invalid (0) as at every other turn: GEM checks the turn limit first and
pays it partial credit, an exploit RL finds (repeat the closest guess: see docs/results.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gemgym.envs.games._common import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    SUCCESS_REWARD,
    TURN_LIMIT_TEXT,
    GameConfig,
    GameEnv,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["GuessTheNumberConfig", "GuessTheNumberEnv"]

_GUESS_RE = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")
_SUFFIX = "Enter your next guess."


@dataclass(frozen=True)
class GuessTheNumberConfig(GameConfig):
    """Configuration; ``min_number=None`` and ``max_number=None`` draw a new range each episode."""

    min_number: int | None = 1
    max_number: int | None = 20
    max_turns: int | None = 20
    partial_credit: bool = True

    @property
    def is_random(self) -> bool:
        return self.min_number is None

    def validate(self) -> None:
        if (self.min_number is None) != (self.max_number is None):
            raise ConfigError("min_number and max_number must both be set or both be None (random)")
        if self.min_number is not None and self.max_number is not None:
            if self.max_number <= self.min_number:
                raise ConfigError(f"max_number ({self.max_number}) must exceed min_number")
            if self.max_turns is None:  # only a random range draws the turns
                raise ConfigError(
                    "max_turns must be a positive int when min_number and max_number are set "
                    "(None only with a random range), got None"
                )


class GuessTheNumberEnv(GameEnv[int]):
    """Guess a hidden number within ``max_turns`` turns (see the module docstring)."""

    task_suffix = _SUFFIX

    config: GuessTheNumberConfig

    format_error_detail = "you did not provide a valid guess"

    episode_settings = ("min_number", "max_number", "max_turns")
    min_number: int = 1
    """The lowest number of the current episode's range (the config's, or drawn)."""
    max_number: int = 10
    """The highest number of the current episode's range (the config's, or drawn)."""

    def __init__(
        self,
        min_number: int | None = 1,
        max_number: int | None = 20,
        max_turns: int | None = 20,
        partial_credit: bool = True,
    ) -> None:
        super().__init__(GuessTheNumberConfig(min_number, max_number, max_turns, partial_credit))
        self._instructions = ""
        self._instructions_key: tuple[int, int, int] | None = None
        self.game_number = 0
        self.previous_guesses: set[int] = set()
        self.low = self.min_number
        self.high = self.max_number
        self.last_guess: int | None = None
        self._last_guess_new = False

    def _get_instructions(self) -> str:
        key = (self.min_number, self.max_number, self.max_turns)
        if key != self._instructions_key:
            example = self.min_number + (self.max_number - self.min_number) // 3
            self._instructions = (
                "You are playing Guess The Number.\n"
                f"You have to guess the number between {self.min_number} and {self.max_number} "
                f"(inclusive) within {self.max_turns} turns.\n"
                "As you enter your guess, the game will provide you with hints such as the target "
                "number is 'higher' or 'lower'.\n"
                "You may provide your response in any manner. Only the number that is wrapped "
                f"inside \\boxed{{}} will be considered as your guess, for example, "
                f"\\boxed{{{example}}}.\n"
                "As you play, the history of your guesses will be appended below. Use the "
                "information to complete the game before you run out of guesses.\n"
                "Enter your first guess to start the game.\n"
            )
            self._instructions_key = key
        return self._instructions

    def start_episode(self) -> str:
        rng = self.rng
        if self.is_random:
            self.min_number = rng.randint(1, 10)
            self.max_number = rng.randint(self.min_number + 5, self.min_number + 50)
            self.max_turns = math.ceil(math.sqrt(self.max_number - self.min_number)) + 1
        self.game_number = rng.randint(self.min_number, self.max_number)
        self.previous_guesses = set()
        self.low, self.high = self.min_number, self.max_number
        self.last_guess = None
        self._last_guess_new = False
        return self._get_instructions()

    def parse_move(self, action: str) -> int | None:
        found = _GUESS_RE.findall(action)
        if not found:
            return None
        raw = found[-1]
        # A huge number is out of range, and int() of 4,300+ digits would raise.
        return int(raw) if len(raw) <= 18 else (10**18 if raw[0] != "-" else -(10**18))

    def play_move(self, guess: int) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        reward = INVALID_ACTION_REWARD
        in_range = self.min_number <= guess <= self.max_number
        self._last_guess_new = in_range and guess not in self.previous_guesses
        if not in_range:
            obs = f"At turn {turn}, you guessed {guess}, which is outside the range specified."
        elif guess in self.previous_guesses:
            obs = f"At turn {turn}, you guessed {guess}, which has been already guessed before."
        else:
            self.previous_guesses.add(guess)
            if guess == self.game_number:
                obs = (
                    f"Congratulations! You guessed the correct number {self.game_number} "
                    f"in {turn} turns."
                )
                return obs, SUCCESS_REWARD, True
            if guess > self.game_number:
                hint = "lower"
                self.high = min(self.high, guess - 1)
            else:
                hint = "higher"
                self.low = max(self.low, guess + 1)
            obs = (
                f"At turn {turn}, you guessed {guess}, and the target number is {hint} "
                f"than {guess}."
            )
            reward = INTERNAL_STEP_REWARD
        self.last_guess = guess
        return obs, reward, None

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        """Partial credit for a new in-range last guess: ``1 - |guess - target| / span``."""
        # a repeat or out-of-range guess is invalid
        close = self._last_guess_new and self.config.partial_credit
        if close and self.last_guess is not None:
            span = self.max_number - self.min_number
            return TURN_LIMIT_TEXT, 1.0 - abs(self.last_guess - self.game_number) / span
        return TURN_LIMIT_TEXT, 0.0

    def sample_random_action(self) -> str:
        return "\\boxed{" + str(self.rng.randint(self.min_number, self.max_number)) + "}"

    def expert_action(self) -> str:
        """Binary search over the interval still consistent with the hints."""
        return "\\boxed{" + str((self.low + self.high) // 2) + "}"


_CARD = "Guess a hidden number from higher/lower hints"
register(
    "game:GuessTheNumber-v0-easy",
    "gemgym.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": 1, "max_number": 10, "max_turns": 4},
    description=f"{_CARD} (1–10, 4 turns)",
)
register(
    "game:GuessTheNumber-v0-hard",
    "gemgym.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": 1, "max_number": 50, "max_turns": 7},
    description=f"{_CARD} (1–50, 7 turns)",
)
register(
    "game:GuessTheNumber-v0-random",
    "gemgym.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": None, "max_number": None, "max_turns": None},
    description=f"{_CARD} (random range each episode)",
)
