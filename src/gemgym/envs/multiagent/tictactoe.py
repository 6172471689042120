r"""TicTacToe: two players take turns marking a 3×3 grid; three in a row wins (zero-sum).

============  =================================================================================
id            ``ma:TicTacToe-v0``
seats         ``player_0`` (X, moves first), ``player_1`` (O)
observation   the rules, the board (cells 1–9, row by row; free cells show their number), whose
              mark the seat plays, the opponent's last move
action        any text; the last ``\boxed{N}`` (N = 1..9, a free cell) is the move
reward        at the end: win +1, loss −1, draw 0; an invalid move (no box, not 1–9, a taken
              cell) −0.1 and the seat tries again; 3 invalid moves in a row forfeit (−1 / +1)
expert        perfect play (minimax over every position; never loses; among equally good moves
              it picks one at random from the env's seeded generator)
forms         ``gemgym.multiagent.make(id)`` (AEC), ``make_parallel(id)``, and
              ``gemgym.make(id)``: the learner as X against a random O (``opponent=``,
              ``learner=`` choose; see :class:`~gemgym.multiagent.SelfPlayEnv`)
============  =================================================================================
"""

from __future__ import annotations

import functools
import random

from gemgym.core import excerpt
from gemgym.envs.games._common import last_boxed
from gemgym.multiagent.game import InvalidMove, TextGame, register_game

__all__ = ["TicTacToe"]

_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_MARKS = ("X", "O")


def _winner(board: str) -> str | None:
    for a, b, c in _LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@functools.cache
def _value(board: str, mark: str) -> int:
    """Minimax value of ``board`` for the side to move (``mark``): +1 win, 0 draw, −1 loss."""
    if _winner(board) is not None:
        return -1  # the previous move won
    free = [i for i, c in enumerate(board) if c == "."]
    if not free:
        return 0
    other = "O" if mark == "X" else "X"
    return max(-_value(board[:i] + mark + board[i + 1 :], other) for i in free)


class TicTacToe(TextGame):
    """Two-player TicTacToe (see the module docstring)."""

    possible_agents = ("player_0", "player_1")

    def __init__(self) -> None:
        self.board = "." * 9
        self.turn = 0
        self.last_move: tuple[str, int] | None = None
        self.forfeited: str | None = None
        self.rng = random.Random()

    def new_game(self, rng: random.Random) -> None:
        self.rng = rng
        self.board = "." * 9
        self.turn = 0
        self.last_move = None
        self.forfeited = None

    def acting(self) -> tuple[str, ...]:
        if self.is_over():
            return ()
        return (self.possible_agents[self.turn % 2],)

    def is_over(self) -> bool:
        return (
            self.forfeited is not None or _winner(self.board) is not None or "." not in self.board
        )

    def render(self) -> str:
        rows = []
        for r in range(3):
            cells = [self.board[3 * r + c] for c in range(3)]
            rows.append(
                " | ".join(ch if ch != "." else str(3 * r + c + 1) for c, ch in enumerate(cells))
            )
        return "\n---------\n".join(rows)

    def observe(self, agent: str) -> str:
        mark = _MARKS[self.possible_agents.index(agent)]
        lines = [
            f"You are playing TicTacToe as {mark} against one opponent. Players take turns "
            "marking a free cell of the 3x3 board; three of your marks in a row, column or "
            "diagonal win. Cells are numbered 1-9, row by row. Answer with the cell in "
            "\\boxed{}, e.g. \\boxed{5}.",
            "",
            self.render(),
        ]
        if self.last_move is not None:
            who, cell = self.last_move
            lines.append(f"\nLast move: {who} took cell {cell + 1}.")
        if self.is_over():
            lines.append(f"\nGame over. {self._result_text(agent)}")
        elif self.acting() == (agent,):
            lines.append(f"\nYour move ({mark}).")
        return "\n".join(lines)

    def _result_text(self, agent: str) -> str:
        r = self.returns()[agent]
        return "You won." if r > 0 else "You lost." if r < 0 else "It is a draw."

    def play_move(self, agent: str, action: str) -> None:
        move = last_boxed(action)
        if move is None:
            raise InvalidMove("give the cell as \\boxed{N} with N from 1 to 9")
        move = move.strip()
        # a length check first: int() raises on 4,300+ digits (and isdigit() admits '²')
        if len(move) > 3 or not move.isdecimal() or not 1 <= int(move) <= 9:
            raise InvalidMove(f"{excerpt(move, 40)!r} is not a cell; cells are 1 to 9")
        cell = int(move) - 1
        if self.board[cell] != ".":
            raise InvalidMove(f"cell {cell + 1} is taken; pick a free cell")
        mark = _MARKS[self.possible_agents.index(agent)]
        self.board = self.board[:cell] + mark + self.board[cell + 1 :]
        self.last_move = (mark, cell)
        self.turn += 1

    def returns(self) -> dict[str, float]:
        if self.forfeited is not None:
            return {a: -1.0 if a == self.forfeited else 1.0 for a in self.possible_agents}
        won = _winner(self.board)
        if won is None:
            return dict.fromkeys(self.possible_agents, 0.0)
        return {a: 1.0 if _MARKS[i] == won else -1.0 for i, a in enumerate(self.possible_agents)}

    def forfeit(self, agent: str) -> None:
        self.forfeited = agent

    def legal_actions(self, agent: str) -> list[str]:
        return [f"\\boxed{{{i + 1}}}" for i, c in enumerate(self.board) if c == "."]

    def action_vocabulary(self, agent: str) -> list[str]:
        return [f"\\boxed{{{i}}}" for i in range(1, 10)]

    def expert_action(self, agent: str) -> str:
        mark = _MARKS[self.possible_agents.index(agent)]
        other = "O" if mark == "X" else "X"
        free = [i for i, c in enumerate(self.board) if c == "."]
        if not free:
            return "\\boxed{1}"
        scores = {i: -_value(self.board[:i] + mark + self.board[i + 1 :], other) for i in free}
        best = max(scores.values())
        return f"\\boxed{{{self.rng.choice([i for i in free if scores[i] == best]) + 1}}}"


register_game(
    "ma:TicTacToe-v0",
    "gemgym.envs.multiagent.tictactoe:TicTacToe",
    description="Two-player TicTacToe (zero-sum; expert: minimax)",
)
