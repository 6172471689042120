r"""Crosswords: fill a small crossword, letter by letter, from its clues.

============  =================================================================================
ids           ``game:Crosswords-v0-easy`` (3 common words, 30 turns),
              ``game:Crosswords-v0-hard`` (3 less common words, 40 turns),
              ``game:Crosswords-v0-random`` (each episode easy or hard, with its turns)
observation   reset: the rules; step: ``"At turn 2, you placed E at (3, 4) correctly."``;
              ``info["suffix"]`` = the grid (``R00``/``C00`` labels, ``_`` a letter to find,
              ``.`` no letter), the clues (``"1. a domestic animal (across): 3 letters"``) and
              ``"Enter your guess."``
action        any text; the last ``\boxed{R C L}`` (0-based row and column, one letter, any
              case)
reward        a right letter: 1 / (letter cells), so a full grid sums to 1.0 and ends the episode
              (``terminated``, success); a wrong letter: 0.0 (the cell stays empty); out of
              bounds, a ``.`` cell or a filled cell: 0.0 (invalid move); no ``\boxed{R C L}``:
              −0.1 and ``terminated``; the turn limit: ``truncated``
expert        reads the answers (allowed for this game): the first empty cell, row by row, gets
              its letter
============  =================================================================================

The words cross where they can (the layout is WordSearch's, without filler letters). Clues ship
with the package (``games/data/crossword_clues.tsv``, see its README): each is the WordNet 3.0
definition of the word's most frequent sense; easy words come from 931 common words, hard ones
from less common words.

Differences from upstream GEM (bugs fixed): randomness is per env; ``sample_random_action`` gives a
well-formed action (GEM's wrapped it in brackets, which its own parser rejects as a format error);
clues are numbered 1, 2, 3 in the order they are listed (GEM's numbering skipped unplaced words);
the random preset keeps the easy/hard turn limits (GEM gave it 20 turns, too few for some grids);
pandas is not needed; a format error at the last turn is not also truncated, and the turn limit
sets ``truncated`` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemgym.envs.games._common import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    GameConfig,
    GameEnv,
    last_boxed_match,
)
from gemgym.envs.games.word_search import Placement, lay_out_words, render_grid
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["CrosswordsConfig", "CrosswordsEnv", "clue_data"]

_MOVE_RE = re.compile(r"\\boxed\{\s*(\d+)[\s,]+(\d+)[\s,]+([a-zA-Z])\s*\}")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_CLUES: dict[bool, tuple[tuple[str, str], ...]] = {}
_RANDOM_TURNS = {False: 30, True: 40}


def clue_data(hardcore: bool) -> tuple[tuple[str, str], ...]:
    """``(WORD, clue)`` pairs of the easy or hard set, loaded once per process."""
    found = _CLUES.get(hardcore)
    if found is None:
        from importlib.resources import files

        text = files("gemgym.envs.games").joinpath("data", "crossword_clues.tsv").read_text("ascii")
        flag = "1" if hardcore else "0"
        rows = []
        for line in text.splitlines():
            word, hard, clue = line.split("\t")
            if hard == flag:
                rows.append((word.upper(), clue))
        found = tuple(rows)
        _CLUES[hardcore] = found
    return found


@dataclass(frozen=True)
class CrosswordsConfig(GameConfig):
    """Configuration; any field ``None`` draws ``hardcore`` at random each episode, with 3 words
    and 30 (easy) or 40 (hard) turns."""

    hardcore: bool | None = False
    max_turns: int | None = 30
    num_words: int | None = 3

    @property
    def is_random(self) -> bool:
        return self.hardcore is None or self.max_turns is None or self.num_words is None

    def validate(self) -> None:
        if self.num_words is not None and not 1 <= self.num_words <= 20:
            raise ConfigError(f"num_words must be in 1..20 (or None), got {self.num_words}")


class CrosswordsEnv(GameEnv[tuple[int, int, str]]):
    """Fill the crossword within ``max_turns`` turns (see the module docstring)."""

    config: CrosswordsConfig

    format_error_detail = "you did not provide a valid guess in \\boxed{row column letter} format"

    episode_settings = ("max_turns", "num_words")
    max_turns: int = 30
    num_words: int = 3
    """The words of the current episode's grid (the config's, or a random preset's)."""

    def __init__(
        self,
        hardcore: bool | None = False,
        max_turns: int | None = 30,
        num_words: int | None = 3,
    ) -> None:
        super().__init__(CrosswordsConfig(hardcore, max_turns, num_words))
        self._drawn_hardcore = False
        self.solution: list[list[str]] = []
        self.board: list[list[str]] = []
        self.placed_words: dict[str, Placement] = {}
        self.clues: dict[str, str] = {}
        self.total_letter_cells = 0
        self.empty_cells = 0

    @property
    def hardcore(self) -> bool:
        """This episode's word set: the config's, or drawn each episode by a random preset."""
        return self._drawn_hardcore if self.is_random else bool(self.config.hardcore)

    def _get_instructions(self) -> str:
        return (
            "You are playing Crosswords.\n"
            "Here is the current state of the Crosswords grid. Each row and column are "
            "numbered.\n"
            "The cells that need to be populated with letters are represented by '_', and those "
            "that do not need words are represented by '.'.\n\n"
            "You can only provide one response per turn. Hence, plan your approach and risk "
            "appetite.\n"
            "Only guesses in the format of \\boxed{row column letter} will be fetched from your "
            "response, e.g. \\boxed{0 0 d}, \\boxed{1 2 G}.\n"
            f"you have to finish the game in a maximum of {self.max_turns} turns.\n"
            "As you play, the history of your choices will be appended below. Use the "
            "information to complete the game."
        )

    def _clue_lines(self) -> str:
        return "\n".join(
            f"{i}. {self.clues[word]} ({placement[2]}): {len(word)} letters"
            for i, (word, placement) in enumerate(self.placed_words.items(), start=1)
        )

    def get_task_suffix(self) -> str:
        return (
            f"Current Board:\n{render_grid(self.board)}\n"
            f"Here are the clues for the words you need to find:\n{self._clue_lines()}\n"
            "Enter your guess."
        )

    def start_episode(self) -> str:
        rng = self.rng
        if self.is_random:
            self._drawn_hardcore = rng.random() < 0.5
            self.num_words = 3
            self.max_turns = _RANDOM_TURNS[self.hardcore]
        data = clue_data(self.hardcore)
        chosen = rng.sample(data, min(self.num_words, len(data)))
        clues = dict(chosen)
        grid, placed = lay_out_words([w for w, _ in chosen], rng)
        self.solution = grid
        self.board = [["_" if ch != "." else "." for ch in row] for row in grid]
        self.placed_words = placed
        self.clues = {w: clues[w] for w in placed}
        self.total_letter_cells = self.empty_cells = sum(ch != "." for row in grid for ch in row)
        return self._get_instructions()

    def parse_move(self, action: str) -> tuple[int, int, str] | None:
        match = last_boxed_match(action, _MOVE_RE)
        if match is None:
            return None
        row, col = (int(g) if len(g) <= 6 else 10**6 for g in match.groups()[:2])
        return row, col, match.group(3).upper()

    def play_move(self, move: tuple[int, int, str]) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        row, col, letter = move
        board = self.board
        reward = INVALID_ACTION_REWARD
        what = f"At turn {turn}, you tried to place {letter} at ({row}, {col})"
        if row >= len(board) or col >= len(board[0]):
            obs = f"{what}, which is out of bounds."
        elif board[row][col] == ".":
            obs = f"{what}, which is a black dot and cannot be filled."
        elif board[row][col] != "_":
            obs = f"{what}, but the cell is already filled."
        elif self.solution[row][col] != letter:
            obs = f"{what}, but it is incorrect."
            reward = INTERNAL_STEP_REWARD
        else:
            board[row][col] = letter
            self.empty_cells -= 1
            reward = 1.0 / self.total_letter_cells
            if self.empty_cells == 0:
                obs = "Congratulations! You completed the Crosswords puzzle!"
                return obs, reward, True
            obs = f"At turn {turn}, you placed {letter} at ({row}, {col}) correctly."
        return obs, reward, None

    def _empty(self) -> list[tuple[int, int]]:
        return [(r, c) for r, row in enumerate(self.board) for c, ch in enumerate(row) if ch == "_"]

    def sample_random_action(self) -> str:
        """A random letter for a random empty cell."""
        rng = self.rng
        empty = self._empty() or [(0, 0)]
        r, c = empty[rng.randrange(len(empty))]
        return f"\\boxed{{{r} {c} {_LETTERS[rng.randrange(26)]}}}"

    def expert_action(self) -> str:
        """The right letter for the first empty cell (the expert knows the answers)."""
        empty = self._empty()
        if not empty:
            return self.sample_random_action()
        r, c = empty[0]
        return f"\\boxed{{{r} {c} {self.solution[r][c]}}}"


_ENTRY = "gemgym.envs.games.crosswords:CrosswordsEnv"
_CARD = "Fill a small crossword from its clues"
register(
    "game:Crosswords-v0-easy",
    _ENTRY,
    kwargs={"hardcore": False, "max_turns": 30, "num_words": 3},
    description=f"{_CARD} (3 common words, 30 turns)",
)
register(
    "game:Crosswords-v0-hard",
    _ENTRY,
    kwargs={"hardcore": True, "max_turns": 40, "num_words": 3},
    description=f"{_CARD} (3 less common words, 40 turns)",
)
register(
    "game:Crosswords-v0-random",
    _ENTRY,
    kwargs={"hardcore": None, "max_turns": None, "num_words": None},
    description=f"{_CARD} (easy or hard each episode)",
)
