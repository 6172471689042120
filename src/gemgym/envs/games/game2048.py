r"""Game2048: slide and merge tiles until the target tile appears.

============  =================================================================================
ids           ``game:Game2048-v0-easy`` (target 64, 50 turns), ``game:Game2048-v0-hard`` (512,
              50), ``game:Game2048-v0-extreme-hard`` (2048, 100), ``game:Game2048-v0-random``
              (each episode one of 16/20, 32/30, 64/50)
observation   reset: the rules; step: ``"At turn 3, you moved left"``; ``info["suffix"]`` = the
              4×4 board (``.`` for empty cells) and ``"Enter your move."``
action        any text; the last ``\boxed{up|down|left|right}`` (any case)
reward        dense log2 progress: when the largest tile (capped at the target) grows from ``a``
              to ``b`` the step earns ``(log2 b − log2 a) / (log2 target − log2 start)``, so the
              rewards of a won game sum to 1.0; reaching the target: ``terminated`` with
              ``info["success"]``; no move left: ``terminated`` (failure); a move that changes
              nothing: 0.0; no parsable move: −0.1 and ``terminated``; turn limit: ``truncated``
expert        depth-2 expectimax (move, tile spawn, move) over a heuristic of empty cells,
              monotone rows/columns, equal neighbours and the largest tile in a corner
============  =================================================================================

After a move a 2 (90 %) or a 4 (10 %) appears on a random empty cell. The hard and extreme-hard
presets keep GEM's turn limits, which are far too short to build a 512 or 2048 tile (a 512 needs
at least ~230 moves, since each move adds only 2–4 to the board's sum): their reward is the
progress toward the target, and no player can win them.

Differences from upstream GEM (bugs fixed): randomness is per env, a format error at the last
turn is not also truncated, the turn limit sets ``truncated`` only, and invalid sizes or targets
(which made GEM divide by zero) are rejected at construction.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from functools import lru_cache

from gemgym.envs.games._common import (
    DIRECTIONS,
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    GameConfig,
    GameEnv,
    parse_direction,
)
from gemgym.errors import ConfigError
from gemgym.registry import register

__all__ = ["Game2048Config", "Game2048Env", "slide_line"]

_RANDOM_PRESETS = ((16, 20), (32, 30), (64, 50))

Board = tuple[int, ...]


@lru_cache(maxsize=1 << 16)
def slide_line(line: tuple[int, ...]) -> tuple[int, ...]:
    """Slide one line toward its start, merging equal neighbours once (``(2,2,2,2)→(4,4,0,0)``)."""
    tiles = [v for v in line if v]
    out: list[int] = []
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(tiles[i] * 2)
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    out.extend([0] * (len(line) - len(out)))
    return tuple(out)


@lru_cache(maxsize=16)
def _lines(size: int) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Flat indices of each line, ordered toward the side the move slides to."""
    rows = [tuple(r * size + c for c in range(size)) for r in range(size)]
    cols = [tuple(r * size + c for r in range(size)) for c in range(size)]
    return {
        "left": tuple(rows),
        "right": tuple(row[::-1] for row in rows),
        "up": tuple(cols),
        "down": tuple(col[::-1] for col in cols),
    }


def _move(board: Board, direction: str, size: int) -> Board:
    new = list(board)
    for idx in _lines(size)[direction]:
        line = tuple(board[i] for i in idx)
        moved = slide_line(line)
        if moved != line:
            for i, v in zip(idx, moved, strict=True):
                new[i] = v
    return tuple(new)


@dataclass(frozen=True)
class Game2048Config(GameConfig):
    """Configuration; ``target_tile=None`` or ``max_turns=None`` draw a preset each episode."""

    target_tile: int | None = 2048
    max_turns: int | None = 1000
    board_size: int = 4

    @property
    def is_random(self) -> bool:
        return self.target_tile is None or self.max_turns is None

    def validate(self) -> None:
        if not 2 <= self.board_size <= 8:
            raise ConfigError(f"board_size must be in 2..8, got {self.board_size}")
        t = self.target_tile
        if t is not None and (t < 8 or t & (t - 1)):
            raise ConfigError(f"target_tile must be a power of two >= 8, got {t}")


class Game2048Env(GameEnv[str]):
    """Reach ``target_tile`` within ``max_turns`` moves (see the module docstring)."""

    config: Game2048Config

    format_error_detail = "you did not provide a valid move. Please use \\boxed{direction} format"

    episode_settings = ("target_tile", "max_turns")
    target_tile: int = 16
    """The tile that wins the current episode (the config's, or a random preset's)."""
    max_turns: int = 20

    def __init__(
        self,
        target_tile: int | None = 2048,
        max_turns: int | None = 1000,
        board_size: int = 4,
    ) -> None:
        super().__init__(Game2048Config(target_tile, max_turns, board_size))
        self.board: Board = (0,) * (board_size * board_size)
        self.max_tile_achieved = 0
        self.init_max_tile = 0
        self._suffix = ""
        self._action_rng = random.Random()

    @property
    def board_size(self) -> int:
        """The side of the board (the config's)."""
        return self.config.board_size

    # -- rendering -----------------------------------------------------------------------------
    def _get_instructions(self) -> str:
        return (
            "You are playing 2048.\n"
            f"Your goal is to reach the {self.target_tile} tile by sliding and merging tiles.\n"
            f"You have {self.max_turns} turns maximum.\n\n"
            "Rules:\n"
            "- When two tiles with the same number touch, they merge into one tile with double "
            "the value.\n"
            "- After each move, a new tile (2 or 4) appears in a random empty spot.\n"
            "- You can move tiles in four directions: 'up', 'down', 'left', 'right'.\n\n"
            "To submit your move, type the direction in \\boxed{...}.\n"
            "For example: \\boxed{left}\n\n"
        )

    def _render(self) -> str:
        n = self.board_size
        rows = []
        for r in range(n):
            cells = self.board[r * n : (r + 1) * n]
            rows.append(" ".join(f"{v:4d}" if v else "   ." for v in cells))
        return "Current board:\n" + "\n".join(rows) + "\nEnter your move."

    def get_task_suffix(self) -> str:
        return self._suffix

    # -- episode -------------------------------------------------------------------------------
    def _spawn(self, board: Board) -> Board:
        empty = [i for i, v in enumerate(board) if not v]
        if not empty:
            return board
        rng = self.rng
        i = empty[int(rng.random() * len(empty))]
        new = list(board)
        new[i] = 2 if rng.random() < 0.9 else 4
        return tuple(new)

    def start_episode(self) -> str:
        if self.is_random:
            self.target_tile, self.max_turns = self.rng.choice(_RANDOM_PRESETS)
        self.board = self._spawn(self._spawn((0,) * (self.board_size * self.board_size)))
        # random actions draw from their own stream, so sampling does not change the spawns
        self._action_rng = random.Random(self.rng.getrandbits(64))
        self.max_tile_achieved = self.init_max_tile = max(self.board)
        self._suffix = self._render()
        return self._get_instructions()

    def _progress_reward(self) -> float:
        current = min(max(self.board), self.target_tile)
        if current <= self.max_tile_achieved:
            return 0.0
        span = math.log2(self.target_tile) - math.log2(self.init_max_tile)
        reward = (math.log2(current) - math.log2(self.max_tile_achieved)) / span
        self.max_tile_achieved = current
        return reward

    def _can_move(self) -> bool:
        return any(_move(self.board, d, self.board_size) != self.board for d in DIRECTIONS)

    def parse_move(self, action: str) -> str | None:
        return parse_direction(action)

    def play_move(self, direction: str) -> tuple[str, float, bool | None]:
        turn = self.turn_count
        moved = _move(self.board, direction, self.board_size)
        if moved == self.board:
            obs = (
                f"At turn {turn}, you chose move '{direction}' which doesn't change the board "
                "state. Try a different direction."
            )
            reward = INVALID_ACTION_REWARD
        else:
            self.board = moved
            reward = INTERNAL_STEP_REWARD + self._progress_reward()
            self.board = self._spawn(self.board)
            self._suffix = self._render()
            if self.max_tile_achieved >= self.target_tile:
                obs = f"Congratulations! You reached the {self.target_tile} tile in {turn} turns!"
                return obs, reward, True
            if not self._can_move():
                obs = "Game over! No more moves possible."
                return obs, reward, False
            obs = f"At turn {turn}, you moved {direction}"
        return obs, reward, None

    def turn_limit(self, obs: str, reward: float) -> tuple[str, float]:
        return f"You have reached the maximum number of turns ({self.max_turns}).", reward

    # -- agents --------------------------------------------------------------------------------
    def sample_random_action(self) -> str:
        return "\\boxed{" + DIRECTIONS[int(self._action_rng.random() * 4)] + "}"

    def expert_action(self) -> str:
        """Depth-2 expectimax: the move with the best expected value after the tile spawn."""
        n = self.board_size
        best, best_value = DIRECTIONS[0], -math.inf
        for d in DIRECTIONS:
            after = _move(self.board, d, n)
            if after == self.board:
                continue
            value = _chance_value(after, n)
            if value > best_value:
                best, best_value = d, value
        return "\\boxed{" + best + "}"


def _chance_value(board: Board, n: int) -> float:
    """Expected value over the spawned tile of the best next move (then the heuristic)."""
    empty = [i for i, v in enumerate(board) if not v]
    if not empty:
        return _heuristic(board, n)
    total = 0.0
    for i in empty:
        for tile, p in ((2, 0.9), (4, 0.1)):
            spawned = (*board[:i], tile, *board[i + 1 :])
            best = -1e18
            for d in DIRECTIONS:
                after = _move(spawned, d, n)
                if after != spawned:
                    best = max(best, _heuristic(after, n))
            if best == -1e18:
                best = -1e9  # no move left: game over
            total += p * best
    return total / len(empty)


@lru_cache(maxsize=1 << 16)
def _heuristic(board: Board, n: int) -> float:
    empty = board.count(0)
    logs = [math.log2(v) if v else 0.0 for v in board]
    mono = 0.0
    smooth = 0.0
    for lines in (_lines(n)["left"], _lines(n)["up"]):
        for idx in lines:
            vals = [logs[i] for i in idx]
            inc = dec = 0.0
            for a, b in itertools.pairwise(vals):
                if a > b:
                    dec += a - b
                else:
                    inc += b - a
                if a and b:
                    smooth -= abs(a - b)
            mono -= min(inc, dec)
    top = max(logs)
    corner = top if top in (logs[0], logs[n - 1], logs[-n], logs[-1]) else 0.0
    return 2.7 * empty + 1.0 * mono + 0.1 * smooth + 1.0 * corner + 0.5 * sum(logs) / len(logs)


_ENTRY = "gemgym.envs.games.game2048:Game2048Env"
_CARD = "Slide and merge tiles to reach a target tile"
register(
    "game:Game2048-v0-easy",
    _ENTRY,
    kwargs={"target_tile": 64, "max_turns": 50},
    description=f"{_CARD} (64 in 50 turns)",
)
register(
    "game:Game2048-v0-hard",
    _ENTRY,
    kwargs={"target_tile": 512, "max_turns": 50},
    description=f"{_CARD} (512 in 50 turns)",
)
register(
    "game:Game2048-v0-extreme-hard",
    _ENTRY,
    kwargs={"target_tile": 2048, "max_turns": 100},
    description=f"{_CARD} (2048 in 100 turns)",
)
register(
    "game:Game2048-v0-random",
    _ENTRY,
    kwargs={"target_tile": None, "max_turns": None},
    description=f"{_CARD} (16/32/64, drawn each episode)",
)
