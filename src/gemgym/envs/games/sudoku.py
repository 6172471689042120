r"""Sudoku: fill the empty cells so every row, column and box holds each digit once.

============  =================================================================================
ids           ``game:Sudoku-v0-easy`` (4×4, 6 given digits, 15 turns), ``game:Sudoku-v0-hard``
              (9×9, 31 given digits, 50 turns), ``game:Sudoku-v0-random`` (each episode one of
              the two)
observation   reset: the rules; step: ``"At turn 2, you placed 3 at R1 C4, which is correct."``;
              ``info["suffix"]`` = the grid with ``R``/``C`` indices (``.`` for empty cells) and
              ``"Enter your move."``
action        any text; the last ``\boxed{row column digit}`` (1-based, separated by spaces or
              commas)
reward        a correct digit: ``1 / (empty cells at reset)``, so a solved grid sums to 1.0; the
              last one ends the episode (``terminated``, ``info["success"]``); a wrong digit,
              a filled cell (clues included) or out-of-range numbers: 0.0; no parsable move: −0.1
              and ``terminated``; turn limit: ``truncated``
expert        a backtracking solver (bit masks, fewest-candidates cell first) run on the current
              board; it plays the solution's digit of the first empty cell
============  =================================================================================

Every puzzle has exactly one solution: cells are removed from a random solved grid in random
order, and a removal is kept only when the solver still finds a single completion (if that stops
before the target, the puzzle keeps a few more given digits). 4×4 grids are drawn uniformly from
all 288 solved grids, whose uniqueness test is a bit-set intersection; 9×9 grids are a canonical
grid shuffled by digit relabelling, row/column swaps within bands and stacks, band/stack swaps and
transposition.

Differences from upstream GEM: GEM's ``clues`` kwarg counted the cells it tried to *remove*
(easy removed 10 of 16 cells, hard 50 of 81); here ``clues`` is the number of given digits and
the presets (6 and 31) reproduce GEM's boards. Randomness is per env, ``sample_random_action``
exists, a format error at the last turn is not also truncated, the turn limit sets ``truncated``
only, and a digit that breaks no visible rule but is not the solution is reported as such (GEM
said it "violates Sudoku rules").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from gemgym.envs.games._common import (
    INVALID_ACTION_REWARD,
    TURN_LIMIT_TEXT,
    GameConfig,
    GameEnv,
    last_boxed_match,
)
from gemgym.errors import ConfigError, ResetNeeded
from gemgym.registry import register

__all__ = ["SudokuConfig", "SudokuEnv", "count_solutions"]

_MOVE_RE = re.compile(r"\\boxed\{\s*(\d+)[\s,]+(\d+)[\s,]+(\d+)\s*\}")
_RANDOM_PRESETS = ((4, 6, 15), (9, 31, 50))
_SCALES = (4, 9)


_SMALL_INTS = {str(i): i for i in range(100)}


def _num(digits: str) -> int:
    return int(digits) if len(digits) < 10 else 10**10  # huge numbers: out of range


@lru_cache(maxsize=4)
def _box_index(scale: int) -> tuple[int, ...]:
    n = 2 if scale == 4 else 3
    return tuple((i // scale // n) * n + (i % scale) // n for i in range(scale * scale))


def count_solutions(board: list[int], scale: int, limit: int = 2) -> tuple[int, list[int] | None]:
    """Count completions of ``board`` (flat, 0 = empty) up to ``limit``; also return the first.

    A backtracking search over bit masks of the digits used in each row, column and box, always
    branching on the empty cell with the fewest candidates.
    """
    box = _box_index(scale)
    full = (1 << (scale + 1)) - 2  # bits 1..scale
    rows = [0] * scale
    cols = [0] * scale
    boxes = [0] * scale
    empty: list[int] = []
    for i, v in enumerate(board):
        if v:
            bit = 1 << v
            r, c, b = i // scale, i % scale, box[i]
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return 0, None  # the givens already conflict
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
        else:
            empty.append(i)
    grid = list(board)
    found: list[list[int]] = []
    count = 0

    def search(todo: list[int]) -> None:
        nonlocal count
        if not todo:
            count += 1
            if not found:
                found.append(list(grid))
            return
        best_k, best_mask, best_n = 0, 0, 99
        for k, i in enumerate(todo):
            mask = full & ~(rows[i // scale] | cols[i % scale] | boxes[box[i]])
            n = mask.bit_count()
            if n < best_n:
                best_k, best_mask, best_n = k, mask, n
                if n <= 1:
                    break
        if best_n == 0:
            return
        i = todo[best_k]
        rest = todo[:best_k] + todo[best_k + 1 :]
        r, c, b = i // scale, i % scale, box[i]
        mask = best_mask
        while mask and count < limit:
            bit = mask & -mask
            mask ^= bit
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            grid[i] = bit.bit_length() - 1
            search(rest)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
        grid[i] = 0

    search(empty)
    return count, (found[0] if found else None)


@lru_cache(maxsize=1)
def _all_4x4() -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """All 288 solved 4×4 grids, and for each (cell, digit) the bit set of grids holding it."""
    grids: list[tuple[int, ...]] = []
    box = _box_index(4)
    cells = [0] * 16

    def fill(i: int) -> None:
        if i == 16:
            grids.append(tuple(cells))
            return
        r, c = divmod(i, 4)
        for d in range(1, 5):
            if all(
                cells[j] != d for j in range(i) if j // 4 == r or j % 4 == c or box[j] == box[i]
            ):
                cells[i] = d
                fill(i + 1)
        cells[i] = 0

    fill(0)
    masks = [[0] * 5 for _ in range(16)]
    for g, grid in enumerate(grids):
        for i, d in enumerate(grid):
            masks[i][d] |= 1 << g
    return tuple(grids), tuple(tuple(m) for m in masks)


@dataclass(frozen=True)
class SudokuConfig(GameConfig):
    """Configuration; any of ``clues``/``max_turns``/``scale`` ``None`` draws a preset."""

    clues: int | None = 31
    max_turns: int | None = 100
    scale: int | None = 9

    @property
    def is_random(self) -> bool:
        return self.clues is None or self.max_turns is None or self.scale is None

    def validate(self) -> None:
        if self.clues is None or self.max_turns is None or self.scale is None:
            return
        if self.scale not in _SCALES:
            raise ConfigError(f"scale must be 4 or 9, got {self.scale}")
        if not 0 <= self.clues <= self.scale * self.scale:
            raise ConfigError(f"clues must be in 0..{self.scale**2}, got {self.clues}")


class SudokuEnv(GameEnv[tuple[int, int, int]]):
    """Complete a uniquely solvable Sudoku (see the module docstring)."""

    config: SudokuConfig

    format_error_detail = "you did not provide a valid move"

    episode_settings = ("clues", "max_turns", "scale")
    clues: int = 6
    """The given digits of the current episode's board (the config's, or a random preset's)."""
    max_turns: int = 15
    scale: int = 4
    """The side of the current episode's board, 4 or 9 (the config's, or a random preset's)."""

    def __init__(
        self,
        clues: int | None = 31,
        max_turns: int | None = 100,
        scale: int | None = 9,
    ) -> None:
        super().__init__(SudokuConfig(clues, max_turns, scale))
        self.solution: list[int] = []
        self.board: list[int] = []
        self.init_num_empty = 0
        self._suffix = ""
        self._instructions = ""
        self._instructions_key: tuple[int, int] | None = None

    # -- generation ----------------------------------------------------------------------------
    def _solved_grid(self) -> list[int]:
        rng = self.rng
        if self.scale == 4:
            grids, _ = _all_4x4()
            return list(grids[int(rng.random() * len(grids))])
        n, s = 3, 9
        digits = list(range(1, s + 1))
        rng.shuffle(digits)
        bands = rng.sample(range(n), n)
        stacks = rng.sample(range(n), n)
        row_order = [b * n + r for b in bands for r in rng.sample(range(n), n)]
        col_order = [b * n + c for b in stacks for c in rng.sample(range(n), n)]
        grid = [digits[(n * (r % n) + r // n + c) % s] for r in row_order for c in col_order]
        if rng.random() < 0.5:
            grid = [grid[c * s + r] for r in range(s) for c in range(s)]
        return grid

    def _remove_cells(self, grid: list[int]) -> list[int]:
        cells = list(range(self.scale * self.scale))
        self.rng.shuffle(cells)
        target_empty = self.scale * self.scale - self.clues
        puzzle = list(grid)
        if self.scale == 4:
            _, masks = _all_4x4()
            given = set(cells)
            removed = 0
            for i in cells:
                if removed >= target_empty:
                    break
                given.discard(i)
                consistent = -1
                for j in given:
                    consistent &= masks[j][grid[j]]
                if consistent & (consistent - 1):  # more than one grid fits: keep the cell
                    given.add(i)
                else:
                    puzzle[i] = 0
                    removed += 1
            return puzzle
        removed = 0
        for i in cells:
            if removed >= target_empty:
                break
            puzzle[i] = 0
            if count_solutions(puzzle, self.scale)[0] == 1:
                removed += 1
            else:
                puzzle[i] = grid[i]
        return puzzle

    # -- rendering -----------------------------------------------------------------------------
    def _get_instructions(self) -> str:
        key = (self.scale, self.max_turns)
        if key != self._instructions_key:
            s = self.scale
            n = 2 if s == 4 else 3
            self._instructions = (
                f"You are playing {'a simple version of ' if s == 4 else ''}Sudoku.\n"
                f"Each row is numbered from 1 to {s}, and each column is also numbered from 1 "
                f"to {s}.\n"
                f"Empty cells are represented by '.', and pre-filled cells contain digits from 1 "
                f"to {s}.\n\n"
                f"Your objective is to fill the empty cells in the {s}x{s} grid with digits from "
                f"1 to {s} such that:\n"
                f"1. Each row contains all digits from 1 to {s} without repetition.\n"
                f"2. Each column contains all digits from 1 to {s} without repetition.\n"
                f"3. Each of the {s} {n}x{n} subgrids contains all digits from 1 to {s} without "
                "repetition.\n\n"
                "Rules and Instructions:\n"
                "1. **Do not overwrite** the initial numbers provided in the grid.\n"
                "2. **Only fill** empty cells represented by '.'.\n"
                "3. You may respond in any manner you prefer, but ensure that your response "
                "includes the format of '\\boxed{row column number}', e.g. \\boxed{1 1 "
                f"{s}}}.\n"
                "4. **Ensure** that your move does not violate Sudoku rules. Invalid moves, "
                "including overwriting pre-filled cells and placing two numbers in one "
                "row/col/sub-grid will result in penalties.\n"
                f"You have {self.max_turns} turns.\n"
                "The history of your moves will be appended as you play more rounds. Use the "
                "history of your move to improve your decision making by avoiding the moves you "
                "have tried. Good luck!\n\n"
            )
            self._instructions_key = key
        return self._instructions

    def _render(self) -> str:
        s = self.scale
        n = 2 if s == 4 else 3
        header = "   " + " ".join(
            f"C{j + 1}" + ("  " if (j + 1) % n == 0 else "") for j in range(s)
        )
        lines = [header]
        board = self.board
        for r in range(s):
            parts = [f"R{r + 1} "]
            for c in range(s):
                v = board[r * s + c]
                parts.append(f" {v if v else '.'} ")
                if (c + 1) % n == 0 and c < s - 1:
                    parts.append("| ")
            lines.append("".join(parts).strip())
            if (r + 1) % n == 0 and r < s - 1:
                lines.append("   " + "- " * 2 * (s - 1))
        return "Here is the current board layout:\n" + "\n".join(lines) + "\nEnter your move."

    def get_task_suffix(self) -> str:
        return self._suffix

    # -- episode -------------------------------------------------------------------------------
    def start_episode(self) -> str:
        if self.is_random:
            self.scale, self.clues, self.max_turns = self.rng.choice(_RANDOM_PRESETS)
        self.solution = self._solved_grid()
        self.board = self._remove_cells(self.solution)
        self.init_num_empty = self.board.count(0)
        self._suffix = self._render()
        return self._get_instructions()

    def _conflicts(self, i: int, digit: int) -> bool:
        s = self.scale
        r, c = divmod(i, s)
        board = self.board
        if digit in board[r * s : (r + 1) * s] or digit in board[c::s]:
            return True
        boxes = _box_index(s)
        return any(board[j] == digit for j in range(s * s) if boxes[j] == boxes[i])

    def parse_move(self, action: str) -> tuple[int, int, int] | None:
        move = last_boxed_match(action, _MOVE_RE)  # no box inside a match: the last box first
        if move is None:
            return None
        row, col, digit = move.groups()
        try:  # numbers written as str() writes them: no int() calls
            return _SMALL_INTS[row], _SMALL_INTS[col], _SMALL_INTS[digit]
        except KeyError:
            return _num(row), _num(col), _num(digit)

    def play_move(self, move: tuple[int, int, int]) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        row, col, digit = move
        s = self.scale
        where = f"{digit} at R{row} C{col}"
        reward = INVALID_ACTION_REWARD
        if not (1 <= row <= s and 1 <= col <= s and 1 <= digit <= s):
            obs = f"At turn {turn}, you tried to place {where}, which is out of bounds."
        else:
            i = (row - 1) * s + col - 1
            if self.board[i]:
                obs = (
                    f"At turn {turn}, you tried to place {where}, which is already filled. "
                    "You cannot overwrite pre-filled cells."
                )
            elif self.solution[i] == digit:
                self.board[i] = digit
                self._suffix = self._render()
                reward = 1.0 / self.init_num_empty
                if 0 not in self.board:
                    obs = "Congratulations! You have completed the Sudoku puzzle!"
                    return obs, reward, True
                obs = f"At turn {turn}, you placed {where}, which is correct."
            elif self._conflicts(i, digit):
                obs = f"At turn {turn}, you tried to place {where}, which violates Sudoku rules."
            else:
                obs = (
                    f"At turn {turn}, you tried to place {where}, which is not correct: "
                    "the puzzle has no solution with it."
                )
        return obs, reward, None

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        return TURN_LIMIT_TEXT, reward

    # -- agents --------------------------------------------------------------------------------
    def sample_random_action(self) -> str:
        r = self.rng.random
        s = self.scale
        return f"\\boxed{{{int(r() * s) + 1} {int(r() * s) + 1} {int(r() * s) + 1}}}"

    def expert_action(self) -> str:
        """Solve the current board by backtracking and fill its first empty cell."""
        if 0 not in self.board:
            raise ResetNeeded("the Sudoku is complete (or not started): call reset() first")
        _, solved = count_solutions(self.board, self.scale, limit=1)
        if solved is None:
            # Only correct digits are ever placed, so a generated puzzle stays solvable: a board
            # without a solution was set from outside (set_state, a test) and has no expert move.
            raise RuntimeError("the Sudoku board has no solution, so there is no expert move")
        i = self.board.index(0)
        r, c = divmod(i, self.scale)
        return f"\\boxed{{{r + 1} {c + 1} {solved[i]}}}"


_ENTRY = "gemgym.envs.games.sudoku:SudokuEnv"
_CARD = "Fill a uniquely solvable Sudoku"
register(
    "game:Sudoku-v0-easy",
    _ENTRY,
    kwargs={"clues": 6, "max_turns": 15, "scale": 4},
    description=f"{_CARD} (4×4, 10 empty cells, 15 turns)",
)
register(
    "game:Sudoku-v0-hard",
    _ENTRY,
    kwargs={"clues": 31, "max_turns": 50, "scale": 9},
    description=f"{_CARD} (9×9, 50 empty cells, 50 turns)",
)
register(
    "game:Sudoku-v0-random",
    _ENTRY,
    kwargs={"clues": None, "max_turns": None, "scale": None},
    description=f"{_CARD} (4×4 or 9×9, drawn each episode)",
)
