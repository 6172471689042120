r"""WordSearch: find the words hidden across or down in a grid of letters.

============  =================================================================================
ids           ``game:WordSearch-v0-easy`` (5 common words, 20 turns),
              ``game:WordSearch-v0-hard`` (5 less common words, 20 turns),
              ``game:WordSearch-v0-random`` (each episode easy or hard)
observation   reset: the rules; step: ``"At turn 2, correct! You found the word 'HOUSE' at
              coordinates (3, 1) to (3, 5)."``; ``info["suffix"]`` = the grid (``R00``/``C00``
              labels, found words in ``[ ]``), ``"Words Found: 1/5"`` and ``"Enter your guess."``
action        any text; the last ``\boxed{R1 C1 R2 C2}`` (0-based start and end cell of a word;
              either end first)
reward        a new word: 1 / (number of words), so finding all sums to 1.0 and ends the episode
              (``terminated``, success); no word there: 0.0; out of bounds, a diagonal, a repeated
              attempt or a word already found: 0.0 (invalid move); no ``\boxed{4 numbers}``: −0.1
              and ``terminated``; the turn limit: ``truncated``
expert        reads the answers (allowed for this game): the next word not yet found
============  =================================================================================

The words are not listed: spotting them is the game. Words run left to right or top to bottom,
may cross each other, and the empty cells get random letters. Words ship with the package
(``games/data/``, see its README): 931 common words of 3–8 letters for the basic game (GEM: NLTK's
``en-basic``), 9,297 less common words of 5–9 letters for ``hardcore`` (GEM: NLTK's ``en``).

Differences from upstream GEM (bugs fixed): randomness is per env; ``sample_random_action`` gives a
well-formed action (GEM's wrapped it in brackets, which its own parser rejects as a format error);
finding a word again from its other end is an invalid move (GEM paid its reward again); nothing is
downloaded; a format error at the last turn is not also truncated, and the turn limit sets
``truncated`` only.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from gemgym.envs.games._common import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    GameConfig,
    GameEnv,
    last_boxed_match,
    words_by_length,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["Placement", "WordSearchConfig", "WordSearchEnv", "lay_out_words", "render_grid"]

_COORDS_RE = re.compile(r"\\boxed\{\s*(\d+)[\s,]+(\d+)[\s,]+(\d+)[\s,]+(\d+)\s*\}")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_POOLS: dict[bool, tuple[str, ...]] = {}

Placement = tuple[int, int, str]
"""Where a word lies: ``(row, col, "across" | "down")`` of its first letter."""


def _pool(hardcore: bool) -> tuple[str, ...]:
    found = _POOLS.get(hardcore)
    if found is None:
        by_length = words_by_length("words_rare.txt" if hardcore else "words_common.txt")
        found = tuple(w for ws in by_length.values() for w in ws)
        _POOLS[hardcore] = found
    return found


def _fits(grid: list[list[str]], word: str, row: int, col: int, direction: str) -> bool:
    size = len(grid)
    if row < 0 or col < 0:
        return False
    if direction == "across":
        if col + len(word) > size:
            return False
        return all(grid[row][col + i] in (".", ch) for i, ch in enumerate(word))
    if row + len(word) > size:
        return False
    return all(grid[row + i][col] in (".", ch) for i, ch in enumerate(word))


def _put(grid: list[list[str]], word: str, row: int, col: int, direction: str) -> None:
    for i, ch in enumerate(word):
        if direction == "across":
            grid[row][col + i] = ch
        else:
            grid[row + i][col] = ch


def lay_out_words(
    words: list[str], rng: random.Random
) -> tuple[list[list[str]], dict[str, Placement]]:
    """Place ``words`` across or down on a square grid, crossing earlier words where they can.

    The grid side is 1.5 × the longest word; the longest word goes in the middle, each next word
    (longest first) takes a random crossing with a placed word when one fits, else the first free
    spot scanning row by row. Empty cells are ``"."``; a word that fits nowhere is left out.
    """
    ordered = sorted(words, key=len, reverse=True)
    directions = {w: rng.choice(("across", "down")) for w in ordered}
    size = round(len(ordered[0]) * 1.5)
    grid = [["."] * size for _ in range(size)]
    placed: dict[str, Placement] = {}
    for word in ordered:
        want = directions[word]
        spot: Placement | None = None
        if not placed:
            row, col = (
                (size // 2, (size - len(word)) // 2)
                if want == "across"
                else ((size - len(word)) // 2, size // 2)
            )
            if _fits(grid, word, row, col, want):
                spot = (row, col, want)
        else:
            crossings = [
                (p_row - i, p_col + j, "down")
                if p_dir == "across"
                else (p_row + j, p_col - i, "across")
                for other, (p_row, p_col, p_dir) in placed.items()
                if (p_dir == "across") == (want == "down")
                for i, ch in enumerate(word)
                for j, other_ch in enumerate(other)
                if ch == other_ch
            ]
            rng.shuffle(crossings)
            spot = next((c for c in crossings if _fits(grid, word, *c)), None)
        if spot is None:
            spot = next(
                (
                    (r, c, want)
                    for r in range(size)
                    for c in range(size)
                    if _fits(grid, word, r, c, want)
                ),
                None,
            )
        if spot is not None:
            _put(grid, word, *spot)
            placed[word] = spot
    return grid, placed


_HEADERS: dict[int, str] = {}


def render_grid(grid: list[list[str]], marked: set[tuple[int, int]] | None = None) -> str:
    """The grid with ``C00``/``R00`` labels; ``marked`` cells are shown in brackets."""
    width = len(grid[0]) if grid else 0
    header = _HEADERS.get(width)
    if header is None:
        header = _HEADERS[width] = "   " + " ".join(f"C{i:02}" for i in range(width))
    lines = [header]
    marked_rows = {r for r, _ in marked} if marked else ()
    for r, row in enumerate(grid):
        if marked and r in marked_rows:
            cells = "".join(
                f"[{ch}] " if (r, c) in marked else f" {ch}  " for c, ch in enumerate(row)
            )
        else:  # each cell " x  ", joined in one call
            cells = " " + "   ".join(row) + "  " if row else ""
        lines.append(f"R{r:02} {cells}")
    return "\n".join(lines)


def _end(word: str, placement: Placement) -> tuple[int, int]:
    row, col, direction = placement
    return (row, col + len(word) - 1) if direction == "across" else (row + len(word) - 1, col)


@dataclass(frozen=True)
class WordSearchConfig(GameConfig):
    """Configuration; any field ``None`` draws ``hardcore`` at random each episode with 5 words
    and 20 turns."""

    hardcore: bool | None = False
    max_turns: int | None = 20
    num_words: int | None = 5

    @property
    def is_random(self) -> bool:
        return self.hardcore is None or self.max_turns is None or self.num_words is None

    def validate(self) -> None:
        if self.num_words is not None and not 1 <= self.num_words <= 30:
            raise ConfigError(f"num_words must be in 1..30 (or None), got {self.num_words}")


class WordSearchEnv(GameEnv[tuple[int, int, int, int]]):
    """Find every hidden word within ``max_turns`` turns (see the module docstring)."""

    config: WordSearchConfig

    format_error_detail = (
        "you did not provide a valid guess in \\boxed{start_row start_col end_row end_col} format"
    )

    episode_settings = ("max_turns", "num_words")
    max_turns: int = 20
    num_words: int = 5
    """The words hidden in the current episode's grid (the config's, or a random preset's)."""

    def __init__(
        self,
        hardcore: bool | None = False,
        max_turns: int | None = 20,
        num_words: int | None = 5,
    ) -> None:
        super().__init__(WordSearchConfig(hardcore, max_turns, num_words))
        self._drawn_hardcore = False
        self.game_board: list[list[str]] = []
        self.placed_words: dict[str, Placement] = {}
        self.found_words: list[str] = []
        self.highlighted: set[tuple[int, int]] = set()
        self.attempts: set[tuple[int, int, int, int]] = set()

    @property
    def hardcore(self) -> bool:
        """This episode's word set: the config's, or drawn each episode by a random preset."""
        return self._drawn_hardcore if self.is_random else bool(self.config.hardcore)

    def _get_instructions(self) -> str:
        return (
            "You are participating in a Word Search challenge "
            f"({'Hardcore' if self.hardcore else 'Basic'}).\n"
            "The objective is to find and highlight hidden words on the grid below.\n"
            "The rows and columns are numbered for your reference.\n\n"
            "Words you have already found are marked in square brackets [ ].\n"
            "Each row and column is numbered for clarity.\n\n"
            "To locate a word, specify the row and column of its start and end letters.\n"
            "Note that words are either across (horizontal) or down (vertical).\n"
            "Use the format \\boxed{start_row start_col end_row end_col} for submission.\n"
            "For instance: \\boxed{1 1 1 5} to find a word from row 1, col 1 to row 1, col 5.\n\n"
            "Guidelines:\n"
            f"- you have a maximum of {self.max_turns} turns to find all the words.\n"
            "- Each guess must be unique; you cannot repeat the same guess.\n"
            "- The history of your attempts will be recorded below.\n"
            "- Make your guesses carefully and strategically!"
        )

    def get_task_suffix(self) -> str:
        return (
            f"Current Board:\n{render_grid(self.game_board, self.highlighted)}\n"
            f"Words Found: {len(self.found_words)}/{len(self.placed_words)}\n"
            "Enter your guess."
        )

    def start_episode(self) -> str:
        rng = self.rng
        if self.is_random:
            self._drawn_hardcore = rng.random() < 0.5
            self.num_words = 5
            self.max_turns = 20
        pool = _pool(self.hardcore)
        words = rng.sample(pool, min(self.num_words, len(pool)))
        grid, self.placed_words = lay_out_words(words, rng)
        filler = iter(rng.choices(_LETTERS, k=sum(row.count(".") for row in grid)))
        for row in grid:
            for c, ch in enumerate(row):
                if ch == ".":
                    row[c] = next(filler)
        self.game_board = grid
        self.found_words = []
        self.highlighted = set()
        self.attempts = set()
        return self._get_instructions()

    def _word_at(self, r1: int, c1: int, r2: int, c2: int) -> str | None:
        ends = {(r1, c1), (r2, c2)}
        for word, placement in self.placed_words.items():
            if ends == {placement[:2], _end(word, placement)}:
                return word
        return None

    def parse_move(self, action: str) -> tuple[int, int, int, int] | None:
        match = last_boxed_match(action, _COORDS_RE)
        if match is None:
            return None
        r1, c1, r2, c2 = (int(g) if len(g) <= 6 else 10**6 for g in match.groups())
        return r1, c1, r2, c2

    def play_move(self, move: tuple[int, int, int, int]) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        r1, c1, r2, c2 = move
        where = f"({r1}, {c1}) to ({r2}, {c2})"
        size = len(self.game_board)
        reward = INVALID_ACTION_REWARD
        if max(r1, c1, r2, c2) >= size:
            obs = f"At turn {turn}, your tried coordinates {where} are out of bounds."
        elif (r1, c1, r2, c2) in self.attempts:
            obs = f"At turn {turn}, you have already tried the coordinates {where}."
        elif r1 != r2 and c1 != c2:
            obs = (
                f"At turn {turn}, you tried {where}, which is not valid because words must be "
                "either across (horizontal) or down (vertical)."
            )
        else:
            self.attempts.add((r1, c1, r2, c2))
            word = self._word_at(r1, c1, r2, c2)
            if word is None:
                obs = f"At turn {turn}, incorrect attempt. No word found at coordinates {where}."
                reward = INTERNAL_STEP_REWARD
            elif word in self.found_words:
                obs = f"At turn {turn}, you already found the word '{word}'."
            else:
                self.found_words.append(word)
                for r in range(min(r1, r2), max(r1, r2) + 1):
                    for c in range(min(c1, c2), max(c1, c2) + 1):
                        self.highlighted.add((r, c))
                reward = 1.0 / len(self.placed_words)
                if len(self.found_words) == len(self.placed_words):
                    obs = "Congratulations! You completed the Word Search puzzle!"
                    return obs, reward, True
                obs = (
                    f"At turn {turn}, correct! You found the word '{word}' at coordinates {where}."
                )
        return obs, reward, None

    def sample_random_action(self) -> str:
        """A random straight segment of at least two cells (across or down)."""
        rng = self.rng
        size = max(2, len(self.game_board))
        fixed, a = rng.randrange(size), rng.randrange(size - 1)
        b = rng.randrange(a + 1, size)
        coords = (fixed, a, fixed, b) if rng.random() < 0.5 else (a, fixed, b, fixed)
        return "\\boxed{" + " ".join(map(str, coords)) + "}"

    def expert_action(self) -> str:
        """The position of the next word not found yet (the expert knows the answers)."""
        for word, placement in self.placed_words.items():
            if word not in self.found_words:
                (r1, c1), (r2, c2) = placement[:2], _end(word, placement)
                return f"\\boxed{{{r1} {c1} {r2} {c2}}}"
        return self.sample_random_action()


_ENTRY = "gemgym.envs.games.word_search:WordSearchEnv"
_CARD = "Find the words hidden in a grid of letters"
register(
    "game:WordSearch-v0-easy",
    _ENTRY,
    kwargs={"num_words": 5, "max_turns": 20, "hardcore": False},
    description=f"{_CARD} (5 common words, 20 turns)",
)
register(
    "game:WordSearch-v0-hard",
    _ENTRY,
    kwargs={"num_words": 5, "max_turns": 20, "hardcore": True},
    description=f"{_CARD} (5 less common words, 20 turns)",
)
register(
    "game:WordSearch-v0-random",
    _ENTRY,
    kwargs={"num_words": None, "max_turns": None, "hardcore": None},
    description=f"{_CARD} (easy or hard each episode)",
)
