r"""Mastermind: find a secret code of digits from black/white peg feedback.

============  =================================================================================
ids           ``game:Mastermind-v0-easy`` (2 digits from 1–6, 10 turns),
              ``game:Mastermind-v0-hard`` (4 digits from 1–8, 30 turns),
              ``game:Mastermind-v0-random`` (each episode: length 2–6, digits 1–n with
              n in length–12, ``10 × (length − 1)`` turns); no digit repeats in the code
observation   reset: the rules; step: ``"At turn 2, you guessed 1 2 3 4. This guess receives 1
              black peg(s) and 2 white peg(s)."``; ``info["suffix"]`` = ``"Enter your guess."``
action        any text; the last ``\boxed{1 2 3 4}`` (numbers separated by spaces or commas) is
              the guess
reward        each time the number of black pegs beats its best so far: (new black pegs) / length
              (so a solved game sums to 1.0; solving ends the episode, ``terminated``); a guess of
              the wrong length, with a number out of range or repeated: 0.0 (invalid move); no
              ``\boxed{...}`` of numbers: −0.1 and ``terminated``; the turn limit: ``truncated``
expert        consistent guess: the first code, in lexicographic order, that agrees with every
              peg count received so far (solves every preset)
============  =================================================================================

Black peg: right digit in the right place; white peg: a digit of the code in another place (each
code digit is matched at most once).

Differences from upstream GEM (bugs fixed): randomness is per env; guesses are shown as ``1 2 3
4`` rather than as a printed Python list; the random preset has a turn limit (GEM's had none and
crashed comparing with ``None``); a format error at the last turn is not also truncated, and the
turn limit sets ``truncated`` only.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from operator import eq
from typing import TYPE_CHECKING

from gemgym.envs.games._common import (
    INVALID_ACTION_REWARD,
    GameConfig,
    GameEnv,
    last_boxed_match,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MastermindConfig", "MastermindEnv", "score_guess"]

# Possessive quantifiers: no backtracking, so long runs of digits or spaces stay linear.
_GUESS_RE = re.compile(r"\\boxed\{\s*+(\d++(?:[\s,]++\d++)*+)\s*+\}")
_SUFFIX = "Enter your guess."
_SMALL_INTS = {str(i): i for i in range(100)}  # every number a code can hold (1..99)
_ALLOWED: dict[int, frozenset[int]] = {}  # the numbers 1..n of a code, by n
_MAX_TABLE = 2_000_000
_TABLES: dict[tuple[int, int, bool], tuple[np.ndarray, np.ndarray]] = {}


def score_guess(code: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """``(black, white)`` pegs of ``guess`` against ``code`` (same length)."""
    if len(code) != len(guess):
        raise ValueError(f"code and guess differ in length ({len(code)} and {len(guess)})")
    black = sum(map(eq, code, guess))
    code_set, guess_set = set(code), set(guess)
    if len(code_set) == len(code) and len(guess_set) == len(guess):  # no repeats: one peg each
        return black, len(code_set & guess_set) - black
    common = 0
    for digit in guess_set:
        in_code, in_guess = code.count(digit), guess.count(digit)
        common += in_code if in_code < in_guess else in_guess
    return black, common - black


def _all_codes(length: int, numbers: int, duplicates: bool) -> itertools.product[tuple[int, ...]]:
    digits = range(1, numbers + 1)
    if duplicates:
        return itertools.product(digits, repeat=length)
    return itertools.permutations(digits, length)  # type: ignore[return-value]


def _table(length: int, numbers: int, duplicates: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Every possible code (rows) and its digit counts, built once per process (read-only)."""
    key = (length, numbers, duplicates)
    found = _TABLES.get(key)
    if found is None:
        size = numbers**length if duplicates else _falling(numbers, length)
        if size > _MAX_TABLE:
            return None
        import numpy as np

        codes = np.array(list(_all_codes(length, numbers, duplicates)), dtype=np.int8)
        counts = np.stack([(codes == c).sum(axis=1) for c in range(numbers + 1)], axis=1)
        codes.setflags(write=False)
        counts.setflags(write=False)
        found = (codes, counts.astype(np.int8))
        _TABLES[key] = found
    return found


def _falling(n: int, k: int) -> int:
    out = 1
    for i in range(k):
        out *= n - i
    return out


@dataclass(frozen=True)
class MastermindConfig(GameConfig):
    """Configuration; ``code_length=None`` or ``num_numbers=None`` draw both each episode and
    ``max_turns=None`` gives ``10 × (length − 1)`` turns."""

    code_length: int | None = 4
    num_numbers: int | None = 6
    duplicate_numbers: bool = False
    max_turns: int | None = 20

    @property
    def is_random(self) -> bool:
        return self.code_length is None or self.num_numbers is None

    def validate(self) -> None:
        if self.code_length is not None and not 1 <= self.code_length <= 10:
            raise ConfigError(f"code_length must be in 1..10 (or None), got {self.code_length}")
        if self.num_numbers is not None and not 1 <= self.num_numbers <= 99:
            raise ConfigError(f"num_numbers must be in 1..99 (or None), got {self.num_numbers}")
        if (
            self.code_length is not None
            and self.num_numbers is not None
            and not self.duplicate_numbers
            and self.num_numbers < self.code_length
        ):
            raise ConfigError(
                f"a code of {self.code_length} distinct numbers needs num_numbers >= "
                f"{self.code_length}, got {self.num_numbers}; raise it or set "
                "duplicate_numbers=True"
            )


class MastermindEnv(GameEnv[tuple[tuple[int, ...], str]]):
    """Guess the secret code within ``max_turns`` turns (see the module docstring)."""

    task_suffix = _SUFFIX

    config: MastermindConfig

    format_error_detail = "you did not provide a valid guess"

    episode_settings = ("code_length", "num_numbers", "max_turns")
    code_length: int = 4
    """The length of the current episode's code (the config's, or drawn)."""
    num_numbers: int = 6
    """The digits of the current episode's code are 1..num_numbers (the config's, or drawn)."""

    def __init__(
        self,
        code_length: int | None = 4,
        num_numbers: int | None = 6,
        duplicate_numbers: bool = False,
        max_turns: int | None = 20,
    ) -> None:
        super().__init__(MastermindConfig(code_length, num_numbers, duplicate_numbers, max_turns))
        if max_turns is None:  # derived from the length (again at each reset)
            self.max_turns = 10 * (self.code_length - 1)
        self.game_code: tuple[int, ...] = ()
        self.milestone = 0
        self.previous_guesses: set[tuple[int, ...]] = set()
        self.history: list[tuple[tuple[int, ...], int, int]] = []
        self._instructions = ""
        self._instructions_key: tuple[int, int, int] | None = None

    @property
    def duplicate_numbers(self) -> bool:
        """Whether a code may repeat a number (the config's)."""
        return self.config.duplicate_numbers

    def _get_instructions(self) -> str:
        key = (self.code_length, self.num_numbers, self.max_turns)
        if key != self._instructions_key:
            self._instructions = self._render_instructions()
            self._instructions_key = key
        return self._instructions

    def _render_instructions(self) -> str:
        example = " ".join(str(i) for i in range(1, self.code_length + 1))
        return (
            "You are playing Mastermind.\n"
            f"You have to guess the secret {self.code_length} digit code within "
            f"{self.max_turns} turns.\n"
            f"The code consists of digits from 1 to {self.num_numbers} (inclusive). "
            f"Duplicate numbers are {'allowed' if self.duplicate_numbers else 'not allowed'}.\n"
            "After you enter your guess, I will mark your guess with black and white pegs, "
            "where a black peg indicates a correct digit in the correct position, while a white "
            "peg indicates a correct digit in the wrong position.\n"
            f"After thinking, format your final answer inside \\boxed{{...}}, for example, "
            f"\\boxed{{{example}}}.\n"
            "As you play, the history of your guesses will be appended below. Use the "
            "information to complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def start_episode(self) -> str:
        rng = self.rng
        if self.is_random:
            self.code_length = rng.randint(2, 6)
            self.num_numbers = rng.randint(self.code_length, 12)
        if self.config.max_turns is None:
            self.max_turns = 10 * (self.code_length - 1)
        digits = range(1, self.num_numbers + 1)
        if self.duplicate_numbers:
            self.game_code = tuple(rng.choices(digits, k=self.code_length))
        else:
            self.game_code = tuple(rng.sample(digits, self.code_length))
        self.milestone = 0
        self.previous_guesses = set()
        self.history = []
        return self._get_instructions()

    def parse_move(self, action: str) -> tuple[tuple[int, ...], str] | None:
        """The guessed numbers and their text as observations show it."""
        match = last_boxed_match(action, _GUESS_RE)
        if match is None:
            return None
        # The group starts and ends with a digit; str.split() and the pattern's \s agree on
        # what is white space.
        parts = match.group(1).replace(",", " ").split()
        try:  # numbers written as str() writes them: no int() calls, and the text as it came
            return tuple(map(_SMALL_INTS.__getitem__, parts)), " ".join(parts)
        except KeyError:
            pass
        # Numbers too long for int() (and for any code) count as out of range.
        guess = tuple(int(t) if len(t) <= 6 else -1 for t in parts)
        return guess, " ".join(str(g) if g >= 0 else "(too long)" for g in guess)

    def play_move(self, move: tuple[tuple[int, ...], str]) -> tuple[str, float, bool | None]:
        guess, shown = move
        turn = self.turn_count
        reward = INVALID_ACTION_REWARD
        n = self.num_numbers
        allowed = _ALLOWED.get(n)
        if allowed is None:
            allowed = _ALLOWED[n] = frozenset(range(1, n + 1))
        if len(guess) != self.code_length:
            obs = (
                f"At turn {turn}, you guessed {len(guess)} number(s) but the code has length "
                f"{self.code_length}."
            )
        elif not allowed.issuperset(guess):
            obs = f"At turn {turn}, you guessed {shown}, which has numbers outside the range 1 to {n}."
        elif guess in self.previous_guesses:
            obs = f"At turn {turn}, you guessed {shown}, which has been already guessed before."
        else:
            self.previous_guesses.add(guess)
            black, white = score_guess(self.game_code, guess)
            self.history.append((guess, black, white))
            if black > self.milestone:
                reward = (black - self.milestone) / self.code_length
                self.milestone = black
            if black == self.code_length:
                obs = f"Congratulations! You guessed the correct code {shown} in {turn} turns."
                return obs, reward, True
            obs = (
                f"At turn {turn}, you guessed {shown}. This guess receives {black} black peg(s) "
                f"and {white} white peg(s)."
            )
        return obs, reward, None

    def sample_random_action(self) -> str:
        digits = range(1, self.num_numbers + 1)
        rng = self.rng
        if self.duplicate_numbers:
            code = rng.choices(digits, k=self.code_length)
        else:
            code = rng.sample(digits, self.code_length)
        return "\\boxed{" + " ".join(map(str, code)) + "}"

    def expert_action(self) -> str:
        """The first code (lexicographic order) consistent with every peg count so far."""
        guess = self._first_consistent()
        return "\\boxed{" + " ".join(map(str, guess)) + "}"

    def _first_consistent(self) -> tuple[int, ...]:
        table = _table(self.code_length, self.num_numbers, self.duplicate_numbers)
        if table is None:  # too many codes for a table: scan them lazily
            for code in _all_codes(self.code_length, self.num_numbers, self.duplicate_numbers):
                if code not in self.previous_guesses and all(
                    score_guess(code, g) == (b, w) for g, b, w in self.history
                ):
                    return code
            return tuple(range(1, self.code_length + 1))
        import numpy as np

        codes, counts = table
        idx = np.arange(len(codes))
        for guess, black, white in self.history:
            sub = codes[idx]
            g = np.array(guess, dtype=np.int8)
            blacks = (sub == g).sum(axis=1)
            g_counts = np.bincount(g, minlength=counts.shape[1])[: counts.shape[1]]
            common = np.minimum(counts[idx], g_counts).sum(axis=1)
            idx = idx[(blacks == black) & (common - blacks == white)]
        for i in idx:
            code = tuple(int(x) for x in codes[i])
            if code not in self.previous_guesses:
                return code
        return tuple(range(1, self.code_length + 1))  # inconsistent history: stay well-formed


_ENTRY = "gemgym.envs.games.mastermind:MastermindEnv"
_CARD = "Find a secret code from black/white peg feedback"
register(
    "game:Mastermind-v0-easy",
    _ENTRY,
    kwargs={"code_length": 2, "num_numbers": 6, "max_turns": 10, "duplicate_numbers": False},
    description=f"{_CARD} (2 of 1–6, 10 turns)",
)
register(
    "game:Mastermind-v0-hard",
    _ENTRY,
    kwargs={"code_length": 4, "num_numbers": 8, "max_turns": 30, "duplicate_numbers": False},
    description=f"{_CARD} (4 of 1–8, 30 turns)",
)
register(
    "game:Mastermind-v0-random",
    _ENTRY,
    kwargs={
        "code_length": None,
        "num_numbers": None,
        "max_turns": None,
        "duplicate_numbers": False,
    },
    description=f"{_CARD} (random size each episode)",
)
